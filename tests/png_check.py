#!/usr/bin/env python3
"""Decodes PNG files with the standard library alone and says whether each holds a picture.

png_check.py FILE...  prints one JSON object per file: {"file", "ok", "error", "width", "height",
"distinct_colors", "non_background_fraction"}. A file decodes when its signature, every chunk's CRC, IHDR
(8-bit greyscale, RGB, grey+alpha or RGBA, no interlace), the zlib stream of its IDAT chunks and every row's
filter (none, sub, up, average, Paeth) are valid. Background is the most common pixel; a blank image has one
colour and a non-background fraction of 0. Used by tests/app_report_test.cpp; independent of matplotlib.
"""
import json
import struct
import sys
import zlib
from collections import Counter

CHANNELS = {0: 1, 2: 3, 4: 2, 6: 4}


def decode(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG signature")
    pos, ihdr, idat, seen_end = 8, None, b"", False
    while pos < len(data):
        if pos + 12 > len(data):
            raise ValueError("truncated chunk at byte %d" % pos)
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if len(body) != length:
            raise ValueError("chunk %r cut short" % kind)
        (crc,) = struct.unpack(">I", data[pos + 8 + length:pos + 12 + length])
        if zlib.crc32(kind + body) & 0xFFFFFFFF != crc:
            raise ValueError("bad CRC in chunk %r" % kind)
        if kind == b"IHDR":
            ihdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        elif kind == b"IEND":
            seen_end = True
            break
        pos += 12 + length
    if ihdr is None or not seen_end:
        raise ValueError("missing IHDR or IEND")
    width, height, depth, color, _, _, interlace = ihdr
    if depth != 8 or color not in CHANNELS or interlace != 0:
        raise ValueError("unsupported IHDR: depth %d colour type %d interlace %d" % (depth, color, interlace))
    if width == 0 or height == 0:
        raise ValueError("empty image %dx%d" % (width, height))
    bpp = CHANNELS[color]
    stride = width * bpp
    raw = zlib.decompress(idat)
    if len(raw) != height * (stride + 1):
        raise ValueError("pixel data holds %d bytes, expected %d" % (len(raw), height * (stride + 1)))
    prev = bytearray(stride)
    pixels = Counter()
    for y in range(height):
        ftype = raw[y * (stride + 1)]
        row = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        if ftype == 1:
            for i in range(bpp, stride):
                row[i] = (row[i] + row[i - bpp]) & 0xFF
        elif ftype == 2:
            row = bytearray((x + b) & 0xFF for x, b in zip(row, prev))
        elif ftype == 3:
            for i in range(stride):
                row[i] = (row[i] + ((row[i - bpp] if i >= bpp else 0) + prev[i]) // 2) & 0xFF
        elif ftype == 4:
            for i in range(bpp):  # no left neighbour: the predictor is the byte above
                row[i] = (row[i] + prev[i]) & 0xFF
            for i in range(bpp, stride):
                a, b, c = row[i - bpp], prev[i], prev[i - bpp]
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                row[i] = (row[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        elif ftype != 0:
            raise ValueError("row %d has filter type %d" % (y, ftype))
        pixels.update(zip(*[iter(row)] * bpp))
        prev = row
    background = pixels.most_common(1)[0][1]
    total = width * height
    return {"width": width, "height": height, "distinct_colors": len(pixels),
            "non_background_fraction": (total - background) / total}


def main():
    for path in sys.argv[1:]:
        result = {"file": path, "ok": False, "error": ""}
        try:
            result.update(decode(path))
            result["ok"] = True
        except (OSError, ValueError, zlib.error) as e:
            result["error"] = str(e)
        print(json.dumps(result))


if __name__ == "__main__":
    main()
