// Write Zarr v3 test stores with zarrita (npm) and numcodecs (npm).
//
// Usage: copy this file into a directory whose node_modules hold zarrita,
// @zarrita/storage and numcodecs, and run node gen_v3.mjs OUTDIR there.
//
// Writes OUTDIR/v3/<name>/ for every case and OUTDIR/raw/<name>.bin, the
// array as zarrita reads it back (C order, little endian), with
// OUTDIR/raw/index.json giving each case's numpy dtype and shape; then
// npy_manifest.py turns those into MANIFEST lines.
import * as fs from "node:fs";
import * as path from "node:path";
import * as zarr from "zarrita";
import FileSystemStore from "@zarrita/storage/fs";
import GZip from "numcodecs/gzip";

// zarrita decodes gzip but cannot encode it: numcodecs' GZip can.
zarr.registry.set("gzip", async () => ({
	fromConfig(c) {
		const g = GZip.fromConfig({ level: c.level ?? 5 });
		return {
			kind: "bytes_to_bytes",
			encode: (b) => g.encode(b),
			decode: (b) => g.decode(b),
		};
	},
}));

const out = process.argv[2];
const store = new FileSystemStore(path.join(out, "v3"));
fs.mkdirSync(path.join(out, "raw"), { recursive: true });
const index = [];

const types = {
	bool: ["|b1", Uint8Array], int8: ["|i1", Int8Array], int16: ["<i2", Int16Array],
	int32: ["<i4", Int32Array], int64: ["<i8", BigInt64Array], uint8: ["|u1", Uint8Array],
	uint16: ["<u2", Uint16Array], uint32: ["<u4", Uint32Array], uint64: ["<u8", BigUint64Array],
	float32: ["<f4", Float32Array], float64: ["<f8", Float64Array],
};

let seed = 12345;
function rnd() {
	seed = (seed * 1103515245 + 12345) % 2147483648;
	return seed / 2147483648;
}

function makeData(dtype, n) {
	const T = types[dtype][1];
	const a = new T(n);
	for (let i = 0; i < n; i++) {
		const v = Math.floor(rnd() * 100) + (i % 50);
		if (dtype === "bool") a[i] = v & 1;
		else if (T === BigInt64Array || T === BigUint64Array) a[i] = BigInt(v * 1000003);
		else if (dtype.startsWith("float")) a[i] = v / 7 - 3;
		else a[i] = v;
	}
	return dtype === "bool" ? new zarr.BoolArray(a.buffer) : a;
}

function stride(shape) {
	const s = new Array(shape.length);
	let acc = 1;
	for (let i = shape.length - 1; i >= 0; i--) {
		s[i] = acc;
		acc *= shape[i];
	}
	return s;
}

async function make(name, { shape, chunks, dtype = "float64", codecs, fillValue = 0, sep, partial, keyEncoding }) {
	const arr = await zarr.create(new zarr.Location(store, "/" + name), {
		shape, chunkShape: chunks, dtype, codecs, fillValue, chunkSeparator: sep,
	});
	if (keyEncoding) {
		const p = path.join(out, "v3", name, "zarr.json");
		const m = JSON.parse(fs.readFileSync(p));
		m.chunk_key_encoding = keyEncoding;
		fs.writeFileSync(p, JSON.stringify(m));
	}
	const n = shape.reduce((a, b) => a * b, 1);
	const data = makeData(dtype, n);
	const a = await zarr.open(new zarr.Location(store, "/" + name), { kind: "array" });
	if (partial) {
		// Only the first chunk: the others stay missing (fill value).
		const sel = chunks.map((c, i) => zarr.slice(0, Math.min(c, shape[i])));
		const sub = sel.map((s, i) => Math.min(chunks[i], shape[i]));
		const m = sub.reduce((x, y) => x * y, 1);
		await zarr.set(a, sel, { data: makeData(dtype, m), shape: sub, stride: stride(sub) });
	} else {
		await zarr.set(a, null, { data, shape, stride: stride(shape) });
	}
	const got = await zarr.get(await zarr.open(new zarr.Location(store, "/" + name), { kind: "array" }));
	const bytes = got.data instanceof zarr.BoolArray ? new Uint8Array(got.data.buffer) : new Uint8Array(got.data.buffer, got.data.byteOffset, got.data.byteLength);
	fs.writeFileSync(path.join(out, "raw", name.replaceAll("/", "_") + ".bin"), bytes);
	index.push({ path: "v3/" + name, dtype: types[dtype][0], shape });
}

const blosc = (cname, shuffle, typesize) => ({
	name: "blosc", configuration: { cname, clevel: 5, shuffle, typesize, blocksize: 0 },
});
const bytesLE = { name: "bytes", configuration: { endian: "little" } };
const bytesBE = { name: "bytes", configuration: { endian: "big" } };

await zarr.create(store); // the root group and its subgroups
for (const g of ["blosc", "codecs", "dtypes", "dims", "keys", "fill"]) {
	await zarr.create(new zarr.Location(store, "/" + g), { attributes: { about: g } });
}
for (const cname of ["lz4", "lz4hc", "blosclz", "zstd", "zlib"]) {
	for (const sh of ["noshuffle", "shuffle", "bitshuffle"]) {
		await make(`blosc/${cname}_${sh}`, { shape: [60, 40], chunks: [25, 16], dtype: "int32", codecs: [bytesLE, blosc(cname, sh, 4)] });
	}
}
await make("codecs/zstd", { shape: [100, 30], chunks: [32, 32], codecs: [bytesLE, { name: "zstd", configuration: { level: 3, checksum: false } }] });
await make("codecs/gzip", { shape: [100, 30], chunks: [32, 7], codecs: [bytesLE, { name: "gzip", configuration: { level: 5 } }] });
await make("codecs/bytes_only", { shape: [17, 5], chunks: [4, 5], dtype: "uint16", codecs: [bytesLE] });
await make("codecs/big_endian", { shape: [33, 9], chunks: [8, 4], dtype: "float64", codecs: [bytesBE, { name: "zstd", configuration: { level: 1, checksum: false } }] });
await make("codecs/big_endian_i2", { shape: [33], chunks: [8], dtype: "int16", codecs: [bytesBE] });
// No transpose: zarrita 0.7.5's set() through a transpose codec writes
// chunks its own get() does not read back; the zarr package's tests check
// transpose against numpy instead.
for (const dt of Object.keys(types)) {
	await make(`dtypes/${dt}`, { shape: [21, 6], chunks: [8, 4], dtype: dt, codecs: [bytesLE, blosc("zstd", "shuffle", 1)] });
}
await make("dims/d1", { shape: [50], chunks: [7], dtype: "int32", codecs: [bytesLE] });
await make("dims/d4", { shape: [3, 4, 5, 6], chunks: [2, 3, 2, 4], dtype: "int16", codecs: [bytesLE, blosc("lz4", "shuffle", 2)] });
await make("keys/dot", { shape: [20, 20], chunks: [6, 6], dtype: "int32", sep: ".", codecs: [bytesLE] });
await make("fill/nan", { shape: [40, 10], chunks: [10, 10], dtype: "float64", fillValue: "NaN", partial: true, codecs: [bytesLE, blosc("lz4", "shuffle", 8)] });
await make("fill/inf", { shape: [40], chunks: [10], dtype: "float32", fillValue: "-Infinity", partial: true, codecs: [bytesLE] });
await make("fill/int", { shape: [40, 3], chunks: [10, 3], dtype: "int16", fillValue: -5, partial: true, codecs: [bytesLE] });
await make("fill/bool", { shape: [40], chunks: [16], dtype: "bool", fillValue: true, partial: true, codecs: [bytesLE] });
fs.writeFileSync(path.join(out, "raw", "index.json"), JSON.stringify(index));
