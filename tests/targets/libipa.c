/* uscope e2e target (interposition): the interposer, loaded before
 * libipb.so (LD_PRELOAD, or first in ipdeps's DT_NEEDED): its ip_alloc
 * takes every call of ip_alloc (3n, where libipb's gives 2n). Its ip_ver
 * is another version's (ip_ver@@IPA_1, libipa.map): the program's calls
 * of ip_ver@IPB_1 stay libipb's. */
static volatile int ip_calls;	/* (a body long enough for every engine's patch) */

int ip_alloc(int n)
{
	ip_calls++;
	return 3 * n;
}

int ip_ver(int n)
{
	ip_calls++;
	return 3 * n;
}
