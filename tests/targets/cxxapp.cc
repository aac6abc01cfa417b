// uscope e2e target (C++ names): namespaces, a class with methods, an
// overloaded method, a function template. Built at -O0 and -O2 (noipa keeps
// every probed function out of line, called with its arguments in the SysV
// registers). `cxxapp [N]` does, for i = 1..N:
//   shop::Cart c(i);  c.add(i)  c.add(i, 2 * i)  c.add("x")   (the overloads)
//   shop::twice<int>(i)  shop::twice<long>(10 * i)
// then prints "cxxapp done <sum>".
#include <cstdio>
#include <cstdlib>

namespace shop {

class Cart {
public:
	explicit Cart(int id) : id_(id), total_(0) {}
	__attribute__((noipa)) long add(int price);
	__attribute__((noipa)) long add(int price, int qty);
	__attribute__((noipa)) long add(const char *name);
	long total() const { return total_; }

private:
	int id_;
	long total_;
};

long Cart::add(int price)
{
	total_ += price;
	return total_;
}

long Cart::add(int price, int qty)
{
	total_ += (long)price * qty;
	return total_;
}

long Cart::add(const char *name)
{
	total_ += name[0];
	return total_;
}

template <typename T> __attribute__((noipa)) T twice(T v)
{
	return v * 2;
}

} // namespace shop

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 3;
	long sum = 0;

	for (int i = 1; i <= n; i++) {
		shop::Cart c(i);

		c.add(i);
		c.add(i, 2 * i);
		sum += c.add("x");
		sum += shop::twice<int>(i) + shop::twice<long>(10L * i);
	}
	printf("cxxapp done %ld\n", sum);
	return 0;
}
