#!/usr/bin/python3
"""Write Zarr v2 test stores with python3-zarr (2.13) and numcodecs.

Usage: gen_v2.py OUTDIR [stored|deflated]

Writes OUTDIR/v2/ (a group hierarchy of arrays, with consolidated
metadata) and OUTDIR/MANIFEST.tsv: for every array, its path relative to
OUTDIR, the sha256 and size of the bytes np.save writes for
zarr.open(path)[...], and the shape.

With "stored" or "deflated", the hierarchy is written by zarr's ZipStore
into OUTDIR/v2.zip instead (members stored, or ZIP_DEFLATED), and the
manifest is of zarr.open(ZipStore(OUTDIR/v2.zip), path)[...].
"""
import hashlib
import io
import lzma
import os
import sys

import numcodecs
import numpy as np
import zarr
from numcodecs import (BZ2, GZip, LZ4, LZMA, Zlib, Zstd, Blosc, Delta,
                       AsType, FixedScaleOffset, Quantize, PackBits, Shuffle)

out = sys.argv[1]
mode = sys.argv[2] if len(sys.argv) > 2 else "dir"
if mode == "dir":
    root_path = os.path.join(out, "v2")
    store = zarr.DirectoryStore(root_path)
    root = zarr.group(store=store, overwrite=True)
else:
    import zipfile
    root_path = os.path.join(out, "v2.zip")
    store = zarr.ZipStore(root_path, mode="w",
                          compression={"stored": zipfile.ZIP_STORED, "deflated": zipfile.ZIP_DEFLATED}[mode])
    root = zarr.group(store=store)
rng = np.random.default_rng(42)
arrays = []


def data(shape, dtype):
    dt = np.dtype(dtype)
    n = int(np.prod(shape)) if len(shape) else 1
    if dt.kind == "b":
        v = rng.integers(0, 2, n).astype(bool)
    elif dt.kind in "iu":
        info = np.iinfo(dt)
        v = (np.arange(n) * 7 + rng.integers(0, 5, n)) % min(info.max, 1000)
        v = v.astype(dt)
    elif dt.kind == "f":
        v = np.cumsum(rng.standard_normal(n)).astype(dt)
    elif dt.kind == "c":
        v = (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(dt)
    elif dt.kind == "S":
        v = np.array([("s%d" % i).encode()[: dt.itemsize] for i in range(n)], dtype=dt)
    elif dt.kind == "U":
        v = np.array([("u\u00e9%d" % i)[: dt.itemsize // 4] for i in range(n)], dtype=dt)
    elif dt.kind == "M":
        v = (np.arange(n) * 1000003).astype("i8").view(dt)
    elif dt.kind == "m":
        v = (np.arange(n) * 3 - 7).astype("i8").view(dt)
    elif dt.kind == "V" and dt.names:
        v = np.zeros(n, dtype=dt)
        for name in dt.names:
            sub = dt.fields[name][0]
            v[name] = np.arange(n * max(1, int(np.prod(sub.shape)))).reshape(
                (n,) + sub.shape).astype(sub.base) if sub.shape else np.arange(n).astype(sub)
    else:
        v = rng.integers(0, 256, n * dt.itemsize).astype("u1").view(dt)
    return v.reshape(shape)


def make(name, shape, chunks, dtype="<f8", write=None, **kw):
    z = root.create_dataset(name, shape=shape, chunks=chunks, dtype=dtype, **kw)
    v = data(shape, dtype)
    if write is None:
        z[...] = v
    else:
        write(z, v)
    arrays.append(name)
    return z


# every compressor
make("comp/none", (100,), (30,), compressor=None)
make("comp/zlib", (100, 7), (30, 4), compressor=Zlib(level=5))
make("comp/gzip", (100, 7), (30, 4), compressor=GZip(level=3))
make("comp/zstd", (100, 7), (30, 4), compressor=Zstd(level=3))
make("comp/lz4", (100, 7), (30, 4), compressor=LZ4())
make("comp/bz2", (100, 7), (30, 4), compressor=BZ2())
make("comp/lzma", (100, 7), (30, 4), compressor=LZMA())
make("comp/lzma_alone", (50,), (20,), compressor=LZMA(format=lzma.FORMAT_ALONE))
# every blosc cname and shuffle; small blocksizes give many blocks
for cname in numcodecs.blosc.list_compressors():
    for sh, sname in [(Blosc.NOSHUFFLE, "noshuffle"), (Blosc.SHUFFLE, "shuffle"),
                      (Blosc.BITSHUFFLE, "bitshuffle"), (Blosc.AUTOSHUFFLE, "auto")]:
        make("blosc/%s_%s" % (cname, sname), (200, 50), (64, 50), dtype="<i4",
             compressor=Blosc(cname=cname, clevel=5, shuffle=sh, blocksize=1024))
make("blosc/default", (1000, 100), (250, 100), dtype="<f4")
make("blosc/big_blocks", (300, 300), (300, 300), dtype="<u2",
     compressor=Blosc(cname="zstd", clevel=1, shuffle=Blosc.SHUFFLE, blocksize=65536))
# filters
make("filters/delta", (500,), (128,), dtype="<i4", filters=[Delta(dtype="<i4", astype="<i2")])
make("filters/delta_f", (500,), (128,), dtype="<f8", filters=[Delta(dtype="<f8")])
make("filters/shuffle", (500, 3), (100, 3), dtype="<f8", filters=[Shuffle(elementsize=8)], compressor=Zlib())
make("filters/astype", (300,), (100,), dtype="<f8", filters=[AsType(encode_dtype="<f4", decode_dtype="<f8")])
make("filters/fixedscaleoffset", (300,), (100,), dtype="<f8",
     filters=[FixedScaleOffset(offset=10, scale=100, dtype="<f8", astype="<i4")])
make("filters/quantize", (300,), (100,), dtype="<f8", filters=[Quantize(digits=3, dtype="<f8")])
make("filters/quantize_f4", (300,), (100,), dtype="<f8", filters=[Quantize(digits=2, dtype="<f8", astype="<f4")])
make("filters/packbits", (301,), (100,), dtype="|b1", filters=[PackBits()])
make("filters/chain", (1000,), (300,), dtype="<i8",
     filters=[Delta(dtype="<i8"), Shuffle(elementsize=8)], compressor=Zstd(level=1))
# order, separators, edge chunks, dimensions
make("order/f2d", (13, 17), (5, 4), dtype="<i4", order="F")
make("order/f3d", (6, 7, 8), (4, 3, 5), dtype="<f8", order="F", compressor=Zlib())
make("order/f_row", (1, 9), (1, 4), dtype="<i2", order="F")
make("order/slash", (20, 30), (7, 11), dtype="<u2", dimension_separator="/")
make("order/f_slash", (9, 10, 3), (4, 4, 2), dtype="<i8", order="F", dimension_separator="/")
make("dims/d0", (), None, dtype="<f8")
make("dims/d1", (37,), (8,), dtype="<i4")
make("dims/d2", (11, 13), (4, 5), dtype="<i4")
make("dims/d3", (5, 6, 7), (2, 4, 3), dtype="<i4")
make("dims/d4", (3, 4, 5, 6), (2, 3, 2, 4), dtype="<i2")
make("dims/d5", (2, 3, 4, 5, 6), (1, 2, 3, 2, 5), dtype="<u1")
make("dims/empty", (0, 5), (3, 5), dtype="<f8")
make("dims/chunk_bigger", (5, 5), (16, 16), dtype="<f4")
# dtypes, both byte orders
for dt in ["|b1", "|i1", "<i2", "<i4", "<i8", "|u1", "<u2", "<u4", "<u8", "<f2", "<f4", "<f8",
           "<c8", "<c16", ">i2", ">i4", ">i8", ">u4", ">f2", ">f4", ">f8", ">c8", ">c16",
           "<M8[ns]", ">M8[s]", "<m8[s]", "|S5", "<U3", ">U4", "|V6"]:
    name = dt.replace("<", "le_").replace(">", "be_").replace("|", "na_").replace("[", "_").replace("]", "")
    make("dtypes/" + name, (23, 5), (10, 3), dtype=dt)
make("dtypes/structured", (40,), (16,), dtype=[("x", "<f8"), ("y", "<i4", (2,)), ("z", "|S3")])
make("dtypes/structured_nested", (20,), (8,), dtype=[("a", [("p", "<u2"), ("q", ">f4")]), ("b", "|u1")])


# missing chunks and fill values: only some chunks are written
def sparse(z, v):
    z[0:3] = v[0:3]
    z[-2:] = v[-2:]


make("fill/nan", (50,), (10,), dtype="<f8", fill_value=np.nan, write=sparse)
make("fill/inf", (50,), (10,), dtype="<f4", fill_value=np.inf, write=sparse)
make("fill/neginf", (50,), (10,), dtype=">f8", fill_value=-np.inf, write=sparse)
make("fill/int", (50,), (10,), dtype="<i2", fill_value=-7, write=sparse)
make("fill/u8max", (50,), (10,), dtype="<u8", fill_value=np.iinfo("u8").max, write=sparse)
make("fill/bytes", (50,), (10,), dtype="|S4", fill_value=b"ab\x00z", write=sparse)
make("fill/unicode", (50,), (10,), dtype="<U2", fill_value="\u00e9x", write=sparse)
make("fill/complex", (50,), (10,), dtype="<c16", fill_value=1 + 2j, write=sparse)
make("fill/bool", (50,), (10,), dtype="|b1", fill_value=True, write=sparse)
make("fill/structured", (50,), (10,), dtype=[("x", "<i4"), ("y", "<f4")],
     fill_value=np.array((3, 1.5), dtype=[("x", "<i4"), ("y", "<f4")]).tobytes(), write=sparse)
make("fill/f_order", (9, 8), (4, 3), dtype="<f8", order="F", fill_value=np.nan,
     write=lambda z, v: z.__setitem__((slice(0, 4), slice(0, 3)), v[0:4, 0:3]))
make("fill/blosc_empty", (1000,), (100,), dtype="<f8", fill_value=2.5, write=lambda z, v: None)
# a nested hierarchy (the groups above are nested too)
g = root.create_group("deep/a/b")
g.attrs["note"] = "nested"
make("deep/a/b/c.zarr", (10, 10), (3, 3), dtype="<i4")
root["dims/d2"].attrs["units"] = "m"
zarr.consolidate_metadata(store)
if mode != "dir":
    store.close()
    store = zarr.ZipStore(root_path, mode="r")
else:
    store = zarr.DirectoryStore(root_path)

with open(os.path.join(out, "MANIFEST.tsv"), "w") as m:
    m.write("path\tsha256\tsize\tshape\n")
    for name in arrays:
        a = zarr.open(store=store, path=name, mode="r")[...]
        buf = io.BytesIO()
        np.save(buf, a)
        b = buf.getvalue()
        m.write("v2/%s\t%s\t%d\t%s\n" % (name, hashlib.sha256(b).hexdigest(), len(b), a.shape))
