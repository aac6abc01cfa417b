__attribute__((noipa, used)) static int twin(int x) { return x + 1; }
__attribute__((noipa)) int call_a(int x) { return twin(x); }
