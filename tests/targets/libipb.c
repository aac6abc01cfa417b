/* uscope e2e target (interposition): the library ipmain links, whose
 * functions another object may interpose (libipa.so). Each answers with
 * its own mark, so the program can say whose definition its calls reached:
 * ip_alloc and ip_ver give 2n here, 3n in libipa. ip_ver is versioned
 * (ip_ver@@IPB_1, libipb.map): a reference to it is bound to that version,
 * which libipa's ip_ver@@IPA_1 is not. ip_only_b is only here. */
static volatile int ip_calls;	/* (a body long enough for every engine's patch) */

int ip_alloc(int n)
{
	ip_calls++;
	return 2 * n;
}

int ip_ver(int n)
{
	ip_calls++;
	return 2 * n;
}

int ip_only_b(int n)
{
	ip_calls++;
	return n + 1;
}
