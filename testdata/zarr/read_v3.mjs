// Read a Zarr v3 array with zarrita and write its bytes (C order, little
// endian) to stdout: an independent reader to cross-check stores the
// zarr package's tests write (sharded stores, which zarrita cannot write).
//
// Usage (in a directory whose node_modules hold zarrita and
// @zarrita/storage): node read_v3.mjs STORE ARRAY_PATH
import * as zarr from "zarrita";
import FileSystemStore from "@zarrita/storage/fs";

const store = new FileSystemStore(process.argv[2]);
const a = await zarr.open(new zarr.Location(store, "/" + process.argv[3]), { kind: "array" });
const got = await zarr.get(a);
const d = got.data;
process.stdout.write(new Uint8Array(d.buffer, d.byteOffset ?? 0, d.byteLength ?? d.buffer.byteLength));
