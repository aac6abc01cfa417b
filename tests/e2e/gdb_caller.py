"""gdb convenience function $_called_from(name): true where a frame above
the selected one is the function name. gdb's own $_any_caller_matches stops
with a Python error at a frame without a name (redis's static functions)."""
import gdb


class CalledFrom(gdb.Function):
    def __init__(self):
        super().__init__("_called_from")

    def invoke(self, name, depth=64):
        want = name.string()
        frame = gdb.selected_frame().older()
        for _ in range(int(depth)):
            if frame is None:
                return False
            if frame.name() == want:
                return True
            frame = frame.older()
        return False


CalledFrom()
