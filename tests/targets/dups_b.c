__attribute__((noipa, used)) static int twin(int x) { return x * 2 + 5; }
__attribute__((noipa)) int call_b(int x) { return twin(x); }
