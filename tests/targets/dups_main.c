/* uscope e2e target: two static functions named `twin`, one in dups_a.c and
 * one in dups_b.c (probing `twin` is ambiguous). */
#include <stdio.h>

int call_a(int x);
int call_b(int x);

int main(void)
{
	printf("dups %d\n", call_a(1) + call_b(2));
	return 0;
}
