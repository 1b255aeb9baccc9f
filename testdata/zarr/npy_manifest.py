#!/usr/bin/python3
"""Turn the arrays gen_v3.mjs dumped (zarrita's reads) into MANIFEST.tsv.

Usage: npy_manifest.py OUTDIR

For every entry of OUTDIR/raw/index.json: the sha256 and size of the
bytes np.save writes for the array zarrita read (C order, little endian).
"""
import hashlib
import io
import json
import os
import sys

import numpy as np

out = sys.argv[1]
with open(os.path.join(out, "raw", "index.json")) as f:
    index = json.load(f)
with open(os.path.join(out, "MANIFEST.tsv"), "w") as m:
    m.write("path\tsha256\tsize\tshape\n")
    for e in index:
        name = e["path"][len("v3/"):].replace("/", "_")
        with open(os.path.join(out, "raw", name + ".bin"), "rb") as f:
            a = np.frombuffer(f.read(), dtype=e["dtype"]).reshape(e["shape"])
        buf = io.BytesIO()
        np.save(buf, a)
        b = buf.getvalue()
        m.write("%s\t%s\t%d\t%s\n" % (e["path"], hashlib.sha256(b).hexdigest(), len(b), tuple(e["shape"])))
