#!/usr/bin/env bash
# Regenerates the example files of this directory with bloscfs's own pack
# (run from the repository root: examples/make-examples.sh), byte for
# byte: every parameter is given, so that a change of pack's defaults
# does not change them (cmd/bloscfs's TestExamplesReproduce checks it).
# Needs mawk (Debian's awk) for the log and Debian's python3-numpy for
# the array inputs, python3-zarr for the Zarr stores, and Go for the
# python-blosc2 store's own frames. BLOSCFS names the binary (default:
# bin/bloscfs, built when missing); an argument names the output
# directory (default: this one).
set -euo pipefail
cd "$(dirname "$0")"
bin=${BLOSCFS:-../bin/bloscfs}
[ -x "$bin" ] || (cd .. && make build)
out=${1:-.}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# A server log, stored as Bloscpack with bloscpack's defaults.
mawk 'BEGIN { srand(7); for (i = 0; i < 30000; i++)
  printf "2026-11-22T%02d:%02d:%02d.%03dZ %s worker-%d request %d took %d ms\n",
    int(i/3600)%24, int(i/60)%60, i%60, (i*37)%1000, (rand() < 0.05 ? "WARN" : "INFO"), i%8, i, 3+int(rand()*200) }' > "$tmp/server-log"
"$bin" pack -f -q --format blp --codec blosclz --clevel 7 --filter shuffle --typesize 1 \
  --chunk-size 1MiB --block-size auto --checksum adler32 "$tmp/server-log" "$out/server-log.blp"

# A float64 temperature series and a 2-D grid, as python-blosc2 would
# store them: a Blosc2 frame (zstd, shuffle) and a .b2nd array.
/usr/bin/python3 - "$tmp" <<'PY'
import numpy as np, sys
t = np.arange(250_000)
temps = (15 + 8 * np.sin(t * 2 * np.pi / 86_400 * 60) + np.random.default_rng(7).normal(0, 0.3, t.size)).round(2)
temps.astype('<f8').tofile(sys.argv[1] + '/temperatures')
y, x = np.mgrid[0:400, 0:300]
np.save(sys.argv[1] + '/grid.npy', (np.sin(x / 17.0) * np.cos(y / 23.0) * 100).round(3).astype('<f8'))
PY
"$bin" pack -f -q --format b2frame --codec zstd --clevel 5 --filter shuffle --typesize 8 \
  --chunk-size 512KiB --block-size 256KiB "$tmp/temperatures" "$out/temperatures.b2frame"
"$bin" pack -f -q --format b2nd --codec lz4 --clevel 5 --filter shuffle --typesize 8 \
  --chunkshape 400,300 --blockshape 50,300 "$tmp/grid.npy" "$out/grid.b2nd"

# A Zarr v2 store written by python3-zarr (Blosc lz4, shuffle): a group
# holding a 2-D float32 array (shown as weather.zarr/pressure.npy).
rm -rf "$out/weather.zarr"
/usr/bin/python3 - "$out/weather.zarr" <<'PY'
import numpy as np, sys, zarr
g = zarr.open_group(sys.argv[1], mode="w")
g.attrs["title"] = "bloscfs example"
y, x = np.mgrid[0:360, 0:720]
p = g.create_dataset("pressure", shape=(360, 720), chunks=(90, 180), dtype="<f4")
p[:] = (1013 + 20 * np.sin(x / 40.0) * np.cos(y / 30.0)).astype("<f4")
p.attrs["units"] = "hPa"
PY
# A python-blosc2 TreeStore zipped as DictStore.to_b2z writes it (shown
# as the directory station.b2z): arrays and a text packed by bloscfs's
# pack, the store's embed.b2e and vlmeta by the store writer of bloscfs's
# tests (internal/testkit/b2w, which follows python-blosc2 4.11's source;
# python-blosc2 4.x needs numpy >= 2.1), values under 8 KiB embedded as
# python-blosc2 4.4.0 embeds them, and Python's zipfile.
mkdir -p "$tmp/st"
/usr/bin/python3 - "$tmp/st" <<'PY'
import numpy as np, sys
d = sys.argv[1]
t = np.arange(8_760)  # a year, hourly
np.save(d + '/temperature.npy', (12 + 9 * np.sin(t * 2 * np.pi / 8766) + 3 * np.cos(t * 2 * np.pi / 24)).round(1).astype('<f8'))
y, x = np.mgrid[0:120, 0:160]
elev = (800 + 300 * np.sin(x / 25.0) * np.cos(y / 19.0)).round(1).astype('<f4')
np.save(d + '/elevation.npy', elev)
np.save(d + '/mask.npy', (elev[::4, ::4] > 900).astype('|u1'))
with open(d + '/notes', 'w') as f:
    f.write("station 42, valley floor\n" + "".join("%04d-01-01 checked sensors, all nominal\n" % (1990 + i) for i in range(40)))
PY
"$bin" pack -f -q --format b2nd --codec lz4 --clevel 5 --filter shuffle --typesize 8 \
  --chunkshape 4380 --blockshape 1095 "$tmp/st/temperature.npy" "$tmp/st/temperature.b2nd"
"$bin" pack -f -q --format b2nd --codec zstd --clevel 5 --filter shuffle --typesize 4 \
  --chunkshape 60,160 --blockshape 15,160 "$tmp/st/elevation.npy" "$tmp/st/elevation.b2nd"
"$bin" pack -f -q --format b2nd --codec zstd --clevel 5 --filter shuffle --typesize 1 \
  --chunkshape 30,40 --blockshape 30,40 "$tmp/st/mask.npy" "$tmp/st/mask.b2nd"
"$bin" pack -f -q --format b2frame --codec zstd --clevel 5 --filter shuffle --typesize 1 \
  --chunk-size 8KiB --block-size 8KiB "$tmp/st/notes" "$tmp/st/notes.b2frame"
(cd .. && go run ./internal/testkit/b2w/mkstore -marker b2tree -threshold 8192 "$tmp/station.b2d" \
  /temperature="$tmp/st/temperature.b2nd" /grid/elevation="$tmp/st/elevation.b2nd" \
  /grid/mask="$tmp/st/mask.b2nd" /notes="$tmp/st/notes.b2frame" \
  "/remote=c2:https://cat2.cloud/demo|@public/examples/ds-1d.b2nd" \
  'vlmeta::title="bloscfs example"' 'vlmeta::station=42' 'vlmeta:/grid:units="m"')
find "$tmp/station.b2d" -type f -exec chmod 644 {} +
/usr/bin/python3 -c 'import sys; sys.path.insert(0, sys.argv[1]); import make_b2z; make_b2z.write(sys.argv[2], sys.argv[3])' \
  ../testdata/b2store "$tmp/station.b2d" "$out/station.b2z"

# A Zarr v2 group zipped whole, as a Zarr store travels in one
# file (shown as a directory ocean.zarr.zip/ holding sst.npy and
# salinity.npy): written by python3-zarr with consolidated metadata, then
# zipped by Python's zipfile as OME-Zarr's RFC-9 lays out a single-file
# store (documents first, members stored; ../testdata/zarr/zip_store.py,
# whose fixed times keep the bytes the same from run to run).
rm -rf "$tmp/ocean.zarr" "$out/ocean.zarr.zip"
/usr/bin/python3 - "$tmp/ocean.zarr" <<'PY'
import numpy as np, sys, zarr, numcodecs
g = zarr.open_group(sys.argv[1], mode="w")
g.attrs["title"] = "bloscfs zipped example"
y, x = np.mgrid[0:180, 0:360]
sst = g.create_dataset("sst", shape=(180, 360), chunks=(90, 120), dtype="<f4",
                       compressor=numcodecs.Blosc(cname="zstd", clevel=5, shuffle=numcodecs.Blosc.SHUFFLE))
sst[:] = (15 + 12 * np.cos(np.radians(y - 90)) + np.sin(x / 25.0)).astype("<f4")
sst.attrs["units"] = "degC"
sal = g.create_dataset("salinity", shape=(180, 360), chunks=(90, 120), dtype="<f4", order="F",
                       compressor=numcodecs.Zlib(level=6), fill_value=np.nan)
sal[:90] = (35 + np.cos(x[:90] / 40.0)).astype("<f4")
zarr.consolidate_metadata(g.store)
PY
/usr/bin/python3 ../testdata/zarr/zip_store.py "$tmp/ocean.zarr" "$out/ocean.zarr.zip"
ls -l "$out"
