#!/usr/bin/python3
"""Copy an ELF64 little-endian file and corrupt its .note.stapsdt section
(the USDT probe descriptors), for the malformed-note tests of uscope.

    badnote.py descsz IN OUT   the 2nd note's descsz runs past the section end
    badnote.py nonul  IN OUT   the 2nd note's strings (provider, name, args)
                               lose every NUL: the provider is unterminated
                               up to the end of the descriptor

Only the non-allocated note section changes: OUT still runs like IN.
Standard library only."""

import struct
import sys


def sections(data):
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        sys.exit("badnote.py: not an ELF64 little-endian file")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    hdrs = []
    for i in range(shnum):
        name, typ, flags, addr, off, size = struct.unpack_from(
            "<IIQQQQ", data, shoff + i * shentsize)
        hdrs.append((name, off, size))
    stroff = hdrs[shstrndx][1]
    for name, off, size in hdrs:
        end = data.index(b"\0", stroff + name)
        yield data[stroff + name:end].decode(), off, size


def notes(data, off, size):
    """(offset of the note header, namesz, descsz, offset of desc) of each note."""
    pos, end = off, off + size
    while pos + 12 <= end:
        namesz, descsz, _ = struct.unpack_from("<III", data, pos)
        desc = pos + 12 + ((namesz + 3) & ~3)
        yield pos, namesz, descsz, desc
        pos = desc + ((descsz + 3) & ~3)


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in ("descsz", "nonul"):
        sys.exit(__doc__)
    mode, src, dst = sys.argv[1:]
    data = bytearray(open(src, "rb").read())
    sec = [(off, size) for name, off, size in sections(data) if name == ".note.stapsdt"]
    if len(sec) != 1:
        sys.exit(f"badnote.py: {src} has {len(sec)} .note.stapsdt sections")
    off, size = sec[0]
    ns = list(notes(data, off, size))
    if len(ns) < 2:
        sys.exit(f"badnote.py: {src} has fewer than 2 USDT notes")
    hdr, namesz, descsz, desc = ns[1]
    if mode == "descsz":
        # from desc, the section has off + size - desc bytes left: go 64 past
        struct.pack_into("<I", data, hdr + 4, off + size - desc + 64)
    else:
        strings = desc + 24           # after the pc, base and semaphore addresses
        for k in range(strings, desc + descsz):
            if data[k] == 0:
                data[k] = ord("X")
    with open(dst, "wb") as f:
        f.write(data)


if __name__ == "__main__":
    main()
