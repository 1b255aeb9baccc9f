#!/usr/bin/python3
"""Zip a Zarr store directory with Python's zipfile, as OME-Zarr's RFC-9
lays out a single-file store (.ozx): the root zarr.json first, then the
other metadata documents breadth-first, then the chunks; members stored
(not compressed), ZIP64 extra fields in every local header
(force_zip64=True). Times are fixed, so that the bytes depend only on
the store.

Usage: zip_store.py SRC_DIR OUT.zip [--folder NAME] [--deflate]

--folder NAME puts the store inside one top-level folder NAME/ (as
`zip -r OUT.zip NAME` does); --deflate compresses the members
(ZIP_DEFLATED), which RFC-9 advises against.
"""
import os
import sys
import zipfile

META = ("zarr.json", ".zgroup", ".zarray", ".zattrs", ".zmetadata")


def main():
    args = sys.argv[1:]
    folder, method = "", zipfile.ZIP_STORED
    if "--folder" in args:
        i = args.index("--folder")
        folder = args[i + 1].strip("/") + "/"
        del args[i:i + 2]
    if "--deflate" in args:
        args.remove("--deflate")
        method = zipfile.ZIP_DEFLATED
    src, out = args
    files = []
    for dirpath, dirnames, filenames in os.walk(src):
        dirnames.sort()
        for f in filenames:
            rel = os.path.relpath(os.path.join(dirpath, f), src).replace(os.sep, "/")
            files.append(rel)

    def order(rel):
        parts = rel.split("/")
        name = parts[-1]
        if name in META:
            # zarr.json before the v2 documents, shallow before deep
            return (0, len(parts), META.index(name), rel)
        return (1, 0, 0, rel)

    files.sort(key=order)
    with zipfile.ZipFile(out, "w", allowZip64=True) as z:
        for rel in files:
            zi = zipfile.ZipInfo(folder + rel, date_time=(1980, 1, 1, 0, 0, 0))
            zi.compress_type = method
            zi.external_attr = 0o644 << 16
            with open(os.path.join(src, rel), "rb") as f:
                data = f.read()
            with z.open(zi, "w", force_zip64=True) as w:
                w.write(data)


main()
