#!/usr/bin/python3
"""Write the .b2z archives of the store fixtures as python-blosc2's
DictStore.to_b2z does (src/blosc2/dict_store.py, v4.11.0): every file of
the store directory but embed.b2e, the largest first, then embed.b2e
last, all ZIP_STORED, through zipfile. For reproducible bytes the walk is
sorted and every member gets one fixed time stamp (to_b2z takes the
files' times).

usage: make_b2z.py DIR   (DIR holds the .b2d fixtures)
"""
import os
import shutil
import sys
import zipfile

STAMP = (2025, 1, 1, 0, 0, 0)


def members(store):
    files = []
    for root, dirs, names in os.walk(store):
        dirs.sort()
        for n in sorted(names):
            p = os.path.join(root, n)
            if os.path.relpath(p, store) != "embed.b2e":
                files.append(p)
    files.sort(key=os.path.getsize, reverse=True)
    return files + [os.path.join(store, "embed.b2e")]


def write(store, out, force_zip64=False):
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as zf:
        for p in members(store):
            info = zipfile.ZipInfo.from_file(p, os.path.relpath(p, store))
            info.date_time = STAMP
            info.compress_type = zipfile.ZIP_STORED
            with open(p, "rb") as src, zf.open(info, "w", force_zip64=force_zip64) as dst:
                shutil.copyfileobj(src, dst, 1024 * 8)


def main(d):
    for name in ("tree_t64k", "dict_t64k", "tree_v411"):
        write(os.path.join(d, name + ".b2d"), os.path.join(d, name + ".b2z"))
    # Local headers with a ZIP64 extra field that the central directory
    # does not have: a member's data starts after its own local header.
    write(os.path.join(d, "dict_t64k.b2d"), os.path.join(d, "dict_t64k_zip64.b2z"), force_zip64=True)


if __name__ == "__main__":
    main(sys.argv[1])
