#!/usr/bin/env python3
"""gen-corpus.py -- writes the seed corpus of fuzz-api (tests/fuzz/corpus/).

Each seed is a small program in fuzz-api.c's input language, written so
that every kind of operation appears in at least one seed.  Rerun after a
change of the opcode table: python3 tests/fuzz/gen-corpus.py
"""
import os
import struct

OP = dict(malloc=0, calloc=3, zalloc=4, realloc=5, rezalloc=7, free=8, free_size=10,
          aligned=11, usable=12, heap_malloc=13, heap_calloc=14, handoff=15,
          heap_destroy=16, heap_delete=17, heap_new=18, collect=19,
          umalloc=20, aligned_recalloc=21, heap_visit=22)


def size(n):
    """the size argument: pick the smallest encoding that holds n"""
    if n <= 128:
        return bytes([0, n])
    if n <= 4096:
        return bytes([32]) + struct.pack('<H', n)
    if n <= 65535:
        return bytes([52]) + struct.pack("<H", n)
    if n <= 8 * 65536 + 255:
        return bytes([60, (n // 65536 - 1) % 8, n % 65536 % 256])
    return bytes([63, (n // (512 * 1024) - 1) % 4]) + struct.pack('<H', n % (512 * 1024) % 65536)


def op(name, slot, *args):
    return bytes([OP[name], slot]) + b''.join(args)


def b(*v):
    return bytes(v)


seeds = {}
seeds['malloc-free'] = b''.join(op('malloc', i, size(8 * i)) for i in range(16)) + \
    b''.join(op('free', i) for i in range(0, 16, 2))
seeds['sizes'] = b''.join(op('malloc', i, size(n)) for i, n in enumerate(
    [0, 1, 7, 8, 15, 16, 17, 63, 64, 65, 100, 127, 128, 1000, 4096, 5000,
     40000, 65536, 100000, 300000, 600000, 1100000]))
seeds['realloc-grow'] = op('malloc', 3, size(1)) + b''.join(
    op('realloc', 3, size(n)) for n in [16, 100, 1000, 4000, 60000, 300000, 700000, 64, 3])
seeds['calloc-zalloc'] = op('calloc', 1, b(10), size(1600)) + op('zalloc', 2, size(3000)) + \
    op('rezalloc', 2, size(9000)) + op('rezalloc', 1, size(50)) + op('usable', 1) + op('usable', 2)
seeds['aligned'] = b''.join(op('aligned', i, size(24 * i + 1), b(i % 13), b(i & 1)) for i in range(13)) + \
    b''.join(op('realloc', i, size(500)) for i in range(0, 13, 3)) + op('free_size', 4)
seeds['heaps'] = op('heap_new', 0, b(1)) + \
    b''.join(op('heap_malloc', i, size(32 * i), b(i % 4)) for i in range(12)) + \
    op('heap_calloc', 20, b(5), size(800), b(2)) + op('realloc', 5, size(5000)) + \
    op('heap_destroy', 0, b(0)) + op('heap_delete', 0, b(1)) + op('free', 1) + op('free', 5)
seeds['handoff'] = b''.join(op('malloc', i, size(48 + i)) + op('handoff', i) for i in range(40)) + \
    b''.join(op('heap_malloc', i, size(200), b(3)) + op('handoff', i) for i in range(10)) + \
    op('heap_destroy', 0, b(3))
seeds['compat'] = b''.join(op('umalloc', i, size(40 * i + 3), b(i & 1)) for i in range(8)) + \
    b''.join(op('aligned_recalloc', 8 + i, b(i), size(64 * i + 16), b(i % 13)) for i in range(6)) + \
    b''.join(op('heap_malloc', 20 + i, size(24 * i + 8), b(2)) for i in range(10)) + \
    op('handoff', 21) + op('heap_visit', 0, b(2)) + op('free', 22) + op('heap_visit', 0, b(2)) + \
    op('heap_delete', 0, b(2)) + op('heap_visit', 0, b(1))
seeds['huge-collect'] = op('malloc', 0, size(1500000)) + op('malloc', 1, size(2000000)) + \
    op('handoff', 0) + op('collect', 0, b(0)) + op('realloc', 1, size(100)) + op('collect', 0, b(1))
seeds['mixed'] = b''.join(
    op('malloc', i % 64, size((i * 37) % 3000)) + op('realloc', (i * 7) % 64, size((i * 11) % 700)) +
    (op('handoff', (i * 5) % 64) if i % 3 == 0 else op('free', (i * 3) % 64))
    for i in range(120))

here = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'corpus')
os.makedirs(here, exist_ok=True)
for name, data in seeds.items():
    with open(os.path.join(here, name), 'wb') as f:
        f.write(data)
