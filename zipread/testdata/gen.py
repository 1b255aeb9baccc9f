#!/usr/bin/env python3
"""Writes the ZIP fixtures of zipread's tests with Python's zipfile, the
writer of zarr-python's ZipStore, python-blosc2's .b2z and RFC-9 .ozx
files. Run it from this folder; the outputs are committed.

- zip64.zip: every member with force_zip64=True, stored, as RFC-9 asks
  (a local ZIP64 extra field of 20 bytes that the central entry, whose
  sizes and offset fit 32 bits, does not have: the two extra fields
  differ in length), and an archive comment.
- deflated.zip: ZIP_DEFLATED members, one of them empty, and a directory
  entry.
- streamed.zip: written to a pipe-like stream that cannot seek, so every
  member has a data descriptor after its data (flag bit 3).
- stub.zip: deflated.zip behind a 1000-byte prefix (a self-extracting
  stub, as `cat stub archive.zip` makes it): the offsets of its records
  count from the archive's start, not the file's.
- end64.zip: zip64.zip whose end of central directory record says
  0xffff/0xffffffff everywhere and defers to a ZIP64 end record and
  locator, as zipfile writes them past 65,535 members or 4 GiB (the
  same records, built here for a small archive).
"""
import io
import struct
import zipfile

def payload(n, seed):
    return bytes((i * 7 + seed) % 251 for i in range(n))

members = [("zarr.json", b'{"zarr_format": 3, "node_type": "group"}'),
           ("a/zarr.json", b'{"zarr_format": 3, "node_type": "array"}'),
           ("a/c/0/0", payload(70000, 1)),
           ("a/c/0/1", payload(300, 2)),
           ("b/deep/x", payload(5, 3))]

with zipfile.ZipFile("zip64.zip", "w", zipfile.ZIP_STORED) as z:
    z.comment = b"an archive comment"
    for name, data in members:
        with z.open(zipfile.ZipInfo(name), "w", force_zip64=True) as f:
            f.write(data)

with zipfile.ZipFile("deflated.zip", "w", zipfile.ZIP_DEFLATED) as z:
    for name, data in members:
        z.writestr(name, data)
    z.writestr("empty", b"")
    z.writestr(zipfile.ZipInfo("dir/"), b"")

class Unseekable(io.RawIOBase):
    def __init__(self):
        self.buf = bytearray()
    def writable(self):
        return True
    def write(self, b):
        self.buf += b
        return len(b)
    def seekable(self):
        return False

out = Unseekable()
with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as z:
    for name, data in members:
        z.writestr(name, data)
open("streamed.zip", "wb").write(bytes(out.buf))

open("stub.zip", "wb").write(b"#!stub\n" + b"\0" * 993 + open("deflated.zip", "rb").read())

data = open("zip64.zip", "rb").read()
e = data.rindex(b"PK\x05\x06")
(sig, disk, cddisk, n, total, cdsize, cdoff, clen) = struct.unpack("<IHHHHIIH", data[e:e + 22])
end64 = struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 45, 45, 0, 0, n, total, cdsize, cdoff)
locator = struct.pack("<IIQI", 0x07064B50, 0, e, 1)
end = struct.pack("<IHHHHIIH", sig, 0xFFFF, 0xFFFF, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, clen)
open("end64.zip", "wb").write(data[:e] + end64 + locator + end + data[e + 22:])
