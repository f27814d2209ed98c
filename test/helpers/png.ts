import { crc32, inflateSync } from 'node:zlib';
import QRCode from 'qrcode';
import { expect } from 'vitest';
import { QR_IMAGE } from '../../src/pix/cashin/qrImage.js';

/**
 * A 1-bit grayscale PNG read back from its bytes, written from the PNG specification: signature,
 * chunk CRCs, IHDR, IDAT inflated, scan lines with filter type 0.
 */
export function readPng(png: Buffer) {
  expect([...png.subarray(0, 8)]).toEqual([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
  const chunks: { type: string; data: Buffer }[] = [];
  for (let at = 8; at < png.length; ) {
    const length = png.readUInt32BE(at);
    const type = png.toString('latin1', at + 4, at + 8);
    const data = png.subarray(at + 8, at + 8 + length);
    expect(png.readUInt32BE(at + 8 + length)).toBe(crc32(png.subarray(at + 4, at + 8 + length)) >>> 0);
    chunks.push({ type, data });
    at += 12 + length;
  }
  expect(chunks.map((c) => c.type)).toEqual(['IHDR', 'IDAT', 'IEND']);
  const ihdr = chunks[0]!.data;
  const width = ihdr.readUInt32BE(0);
  const height = ihdr.readUInt32BE(4);
  expect([...ihdr.subarray(8)]).toEqual([1, 0, 0, 0, 0]); // 1-bit grayscale, no interlace
  const raw = inflateSync(chunks[1]!.data);
  const stride = Math.ceil(width / 8) + 1;
  expect(raw.length).toBe(stride * height);
  for (let y = 0; y < height; y++) expect(raw[y * stride]).toBe(0); // filter type "none" on every line
  return {
    width,
    height,
    black: (x: number, y: number) => (raw[y * stride + 1 + (x >> 3)]! & (0x80 >> (x & 7))) === 0,
  };
}

/**
 * Asserts that a `data:image/png;base64,…` URL shows exactly the QR symbol (error correction M) of
 * `text`, pixel for pixel, with the quiet zone and scale of QR_IMAGE.
 */
export function expectQrImageOf(dataUrl: string, text: string) {
  expect(dataUrl).toMatch(/^data:image\/png;base64,[A-Za-z0-9+/]+=*$/);
  const image = readPng(Buffer.from(dataUrl.split(',')[1]!, 'base64'));
  const symbol = QRCode.create(text, { errorCorrectionLevel: 'M' }).modules;
  const { scale, margin } = QR_IMAGE;
  expect(image.width).toBe((symbol.size + 2 * margin) * scale);
  expect(image.height).toBe(image.width);
  for (let y = 0; y < image.height; y++) {
    for (let x = 0; x < image.width; x++) {
      const r = Math.floor(y / scale) - margin;
      const c = Math.floor(x / scale) - margin;
      const dark = r >= 0 && c >= 0 && r < symbol.size && c < symbol.size && symbol.get(r, c) === 1;
      if (image.black(x, y) !== dark) throw new Error(`pixel (${x}, ${y}) should be ${dark ? 'black' : 'white'}`);
    }
  }
}
