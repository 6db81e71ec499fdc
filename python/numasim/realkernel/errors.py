"""The real-kernel backends' one error type: every failure says what failed and how to fix it."""

from numasim.exceptions import NumasimError


class RealKernelError(NumasimError):
    """A real-kernel run could not be made (no QEMU, download failed, guest panic, timeout...)."""

    def __init__(self, msg: str, loc: str = "realkernel"):
        super().__init__(msg)
        self.msg = msg
        self.loc = loc
