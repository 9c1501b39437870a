#!/usr/bin/env python3
"""vmlinux.py VMLINUZ OUT: the uncompressed ELF kernel inside a bzImage.

QEMU boots an ELF vmlinux through its PVH entry (with qboot), which under
TCG is several seconds faster than letting the bzImage decompress itself.
Debian's kernels are XZ-compressed (CONFIG_KERNEL_XZ); gzip and zstd are
tried too. Exits 1, naming the file, when no compressed ELF is found."""
import gzip
import lzma
import sys
import zlib

MAGICS = [
    (b"\xfd7zXZ\x00", lambda d: lzma.LZMADecompressor().decompress(d)),
    (b"\x1f\x8b\x08", lambda d: zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(d)),
]


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: vmlinux.py VMLINUZ OUT")
    data = open(sys.argv[1], "rb").read()
    for magic, decompress in MAGICS:
        pos = data.find(magic)
        while pos >= 0:
            try:
                out = decompress(data[pos:])
            except (lzma.LZMAError, zlib.error, EOFError, gzip.BadGzipFile):
                out = b""
            if out[:4] == b"\x7fELF":
                with open(sys.argv[2], "wb") as f:
                    f.write(out)
                return
            pos = data.find(magic, pos + 1)
    sys.exit("vmlinux.py: %s: no compressed ELF kernel found" % sys.argv[1])


main()
