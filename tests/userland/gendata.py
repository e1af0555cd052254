#!/usr/bin/python3
"""Deterministic input data for the userland compatibility suite.

Usage: gendata.py DIR

Everything is derived from one fixed seed, so two invocations (and two
machines with the same Python) produce byte-identical files.  The suite only
needs the data to be identical between its two runs, which always share one
generated copy, but stable data makes failures reproducible.
"""
import os
import random
import sys

SEED = 20240601
FIXED_TIME = 1577934245          # 2020-01-02 03:04:05 UTC


def main(out):
    rng = random.Random(SEED)
    os.makedirs(out, exist_ok=True)

    def path(name):
        return os.path.join(out, name)

    letters = "abcdefghijklmnopqrstuvwxyz"
    vocab, seen = [], set()
    while len(vocab) < 6000:
        w = "".join(rng.choice(letters) for _ in range(rng.randint(2, 10)))
        if w not in seen:
            seen.add(w)
            vocab.append(w)
    # Zipf-like popularity so uniq -c / word counts have a long tail.
    cum, acc = [], 0.0
    for i in range(len(vocab)):
        acc += 1.0 / (i + 1) ** 0.9
        cum.append(acc)

    def words(k):
        return rng.choices(vocab, cum_weights=cum, k=k)

    # words.txt: ~6.5 MiB, "w1 w2 w3 N"
    with open(path("words.txt"), "w") as f:
        for _ in range(250000):
            a, b, c = words(3)
            f.write("%s %s %s %d\n" % (a, b, c, rng.randint(0, 99999)))

    # nums.txt: integers, decimals, negatives, a few exponents (for sort -g)
    with open(path("nums.txt"), "w") as f:
        for i in range(300000):
            r = rng.random()
            if r < 0.6:
                f.write("%d\n" % rng.randint(-10**9, 10**9))
            elif r < 0.95:
                f.write("%d.%03d\n" % (rng.randint(-99999, 99999), rng.randint(0, 999)))
            else:
                f.write("%d.%de%d\n" % (rng.randint(1, 9), rng.randint(0, 99), rng.randint(-5, 5)))

    # utf8.txt: multibyte text for C.UTF-8 runs
    extra = "äöüéèçñßøåæœłžšđ€中文字日本語한국어ΑΒΓαβγДЖЯжя"
    with open(path("utf8.txt"), "w", encoding="utf-8") as f:
        for _ in range(60000):
            parts = []
            for w in words(rng.randint(1, 4)):
                if rng.random() < 0.5:
                    pos = rng.randint(0, len(w))
                    w = w[:pos] + rng.choice(extra) + w[pos:]
                if rng.random() < 0.2:
                    w = w.capitalize()
                parts.append(w)
            f.write(" ".join(parts) + "\n")

    # keys1.csv / keys2.csv: sorted join inputs
    for name, n in (("keys1.csv", 60000), ("keys2.csv", 50000)):
        keys = sorted(rng.sample(range(200000), n))
        with open(path(name), "w") as f:
            for k in keys:
                f.write("k%07d,%s,%d\n" % (k, words(1)[0], rng.randint(0, 999)))

    # blob.bin: 3 MiB of pseudo-random bytes
    with open(path("blob.bin"), "wb") as f:
        f.write(rng.randbytes(3 * 1024 * 1024))

    # text.txt: ~1.3 MiB of prose-like paragraphs with punctuation and tabs
    with open(path("text.txt"), "w") as f:
        for _ in range(4000):
            sentences = []
            for _ in range(rng.randint(1, 6)):
                ws = words(rng.randint(3, 14))
                ws[0] = ws[0].capitalize()
                sentences.append(" ".join(ws) + rng.choice(".!?;"))
            para = " ".join(sentences)
            if rng.random() < 0.2:
                para = "\t" + para
            f.write(para + "\n\n")

    # patterns.txt: fixed strings for grep -F -f
    with open(path("patterns.txt"), "w") as f:
        for w in rng.sample(vocab[200:], 1500):
            f.write(w + "\n")

    # inserts.sql: bulk insert for the sqlite3 CLI (120k rows, one transaction)
    with open(path("inserts.sql"), "w") as f:
        f.write("CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, grp INTEGER,"
                " val REAL, tag TEXT);\nBEGIN;\n")
        for i in range(1, 120001):
            f.write("INSERT INTO t VALUES(%d,'%s',%d,%d.%02d,'%s');\n" % (
                i, words(1)[0], rng.randint(0, 499), rng.randint(0, 9999),
                rng.randint(0, 99), rng.choice(("red", "green", "blue", "x'y"))
                .replace("'", "''")))
        f.write("COMMIT;\n")

    # tree/: a directory tree with fixed contents, modes and times
    tree = path("tree")
    for d in range(16):
        dd = os.path.join(tree, "d%02d" % d)
        sub = os.path.join(dd, "sub")
        os.makedirs(sub, exist_ok=True)
        for i in range(25):
            fn = os.path.join(dd, "f%03d.txt" % i)
            size = rng.randint(0, 16384)
            data = []
            n = 0
            while n < size:
                line = " ".join(words(rng.randint(1, 8))) + "\n"
                data.append(line)
                n += len(line)
            with open(fn, "w") as f:
                f.write("".join(data)[:size])
            os.chmod(fn, 0o600 if i % 7 == 3 else 0o644)
        for i in range(10):
            fn = os.path.join(sub, "b%02d.dat" % i)
            with open(fn, "wb") as f:
                f.write(rng.randbytes(rng.randint(0, 40000)))
            os.chmod(fn, 0o755 if i % 4 == 0 else 0o644)
        link = os.path.join(dd, "link")
        if not os.path.lexists(link):
            os.symlink("f%03d.txt" % (d % 25), link)
    for root, dirs, files in os.walk(tree, topdown=False):
        for name in files:
            os.utime(os.path.join(root, name), (FIXED_TIME, FIXED_TIME),
                     follow_symlinks=False)
        for name in dirs:
            p = os.path.join(root, name)
            os.chmod(p, 0o755)
            os.utime(p, (FIXED_TIME, FIXED_TIME))
    os.chmod(tree, 0o755)
    os.utime(tree, (FIXED_TIME, FIXED_TIME))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: gendata.py DIR")
    main(sys.argv[1])
