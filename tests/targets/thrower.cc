// uscope e2e target (C++): `thrower [N [wait]]`. One round throws and
// catches std::runtime_error("boom") N times (default 3), then a struct
// MyErr once. Each throw goes through __cxa_throw, i.e. libstdc++'s USDT
// probe %libstdcxx:throw (arg2 = the std::type_info *; the mangled type
// name, "St13runtime_error" / "5MyErr", is the char * at offset 8 of it).
// Without "wait": one round, prints "thrower done n=N caught=C" (C = N + 1
// per round) and exits 0. With "wait": prints "ready", then one round per
// line read from stdin, each followed by "round K caught=C" (C cumulative);
// at EOF prints "thrower done n=N caught=C" and exits 0.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

struct MyErr {
	int code;
};

__attribute__((noinline)) static void boom(int i)
{
	if (i >= 0)
		throw std::runtime_error("boom");
	throw MyErr{7};
}

static int round_(int n)
{
	int caught = 0;

	for (int i = 0; i < n; i++) {
		try {
			boom(i);
		} catch (const std::runtime_error &) {
			caught++;
		}
	}
	try {
		boom(-1);
	} catch (const MyErr &e) {
		caught += e.code == 7;
	}
	return caught;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? (int)std::strtol(argv[1], nullptr, 0) : 3;
	bool wait = argc > 2 && std::strcmp(argv[2], "wait") == 0;
	int caught = 0, k = 0;
	char buf[256];

	if (!wait) {
		caught = round_(n);
	} else {
		std::printf("ready\n");
		std::fflush(stdout);
		while (std::fgets(buf, sizeof(buf), stdin)) {
			caught += round_(n);
			std::printf("round %d caught=%d\n", ++k, caught);
			std::fflush(stdout);
		}
	}
	std::printf("thrower done n=%d caught=%d\n", n, caught);
	return 0;
}
