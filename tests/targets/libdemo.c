/* uscope e2e target library: lib_mul(a, b) returns a * b. */
__attribute__((noipa, used, visibility("default"))) int lib_mul(int a, int b)
{
	return a * b;
}
