#!/no/such/interpreter
# a script whose interpreter is missing (test_python.py: refused with one line)
