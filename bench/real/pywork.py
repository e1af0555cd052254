"""Pure-Python workload run by the `python3` benchmark (Debian's
/usr/bin/python3, started with PYTHONMALLOC=malloc so that every object is a
malloc/free, and PYTHONHASHSEED=0 so that the run is repeatable).

Stands for: scripting-language applications (build tools, web back-ends,
data munging scripts): class instances with attribute dicts, lists, dicts,
tuples, strings and ints created and dropped by the million.

Every part checks its own result; the last line of output is compared with a
reference run by bench/run.  Exits non-zero (AssertionError) on a mismatch.
"""
import random
import sys

ROUNDS = 1


class Node:
    def __init__(self, left, right, value):
        self.left = left
        self.right = right
        self.value = value


def make_tree(depth, value):
    if depth == 0:
        return Node(None, None, value)
    return Node(make_tree(depth - 1, 2 * value), make_tree(depth - 1, 2 * value + 1), value)


def tree_sum(t):
    total, stack = 0, [t]
    while stack:
        n = stack.pop()
        total += n.value
        if n.left is not None:
            stack.append(n.left)
            stack.append(n.right)
    return total


def trees():
    check = 0
    for depth in range(4, 15, 2):
        for _ in range(2 ** (15 - depth)):
            t = make_tree(depth, 1)
            s = tree_sum(t)
            # values are 1 .. 2^(depth+1)-1 exactly once
            n = 2 ** (depth + 1) - 1
            assert s == n * (n + 1) // 2, "tree sum"
            check += s & 0xFFFF
    return check


WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta",
         "iota", "kappa", "lambda", "mu", "nu", "xi", "omicron", "pi", "rho"]


def text(rng):
    lines = []
    for i in range(20000):
        k = rng.randint(3, 15)
        lines.append(" ".join(rng.choice(WORDS) + str(rng.randint(0, 30)) for _ in range(k)))
    doc = "\n".join(lines)
    counts = {}
    total = 0
    for line in doc.split("\n"):
        for w in line.split():
            counts[w] = counts.get(w, 0) + 1
            total += 1
    assert sum(counts.values()) == total, "word count"
    top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:10]
    upper = {w.upper(): c for w, c in counts.items()}
    assert len(upper) == len(counts)
    return total, tuple(top)


def encode(v, out):
    if isinstance(v, dict):
        out.append("{")
        first = True
        for k in sorted(v):
            if not first:
                out.append(",")
            first = False
            out.append('"%s":' % k)
            encode(v[k], out)
        out.append("}")
    elif isinstance(v, list):
        out.append("[")
        for i, x in enumerate(v):
            if i:
                out.append(",")
            encode(x, out)
        out.append("]")
    elif isinstance(v, str):
        out.append('"%s"' % v)
    else:
        out.append(str(v))


class Parser:
    def __init__(self, s):
        self.s = s
        self.i = 0

    def value(self):
        c = self.s[self.i]
        if c == "{":
            self.i += 1
            d = {}
            while self.s[self.i] != "}":
                if self.s[self.i] == ",":
                    self.i += 1
                k = self.string()
                assert self.s[self.i] == ":"
                self.i += 1
                d[k] = self.value()
            self.i += 1
            return d
        if c == "[":
            self.i += 1
            lst = []
            while self.s[self.i] != "]":
                if self.s[self.i] == ",":
                    self.i += 1
                lst.append(self.value())
            self.i += 1
            return lst
        if c == '"':
            return self.string()
        j = self.i
        while j < len(self.s) and self.s[j] in "-0123456789":
            j += 1
        v = int(self.s[self.i:j])
        self.i = j
        return v

    def string(self):
        assert self.s[self.i] == '"'
        j = self.s.index('"', self.i + 1)
        v = self.s[self.i + 1:j]
        self.i = j + 1
        return v


def random_doc(rng, depth):
    if depth == 0 or rng.random() < 0.2:
        r = rng.random()
        if r < 0.5:
            return rng.randint(-10 ** 6, 10 ** 6)
        return rng.choice(WORDS) * rng.randint(1, 4)
    if rng.random() < 0.5:
        return [random_doc(rng, depth - 1) for _ in range(rng.randint(0, 6))]
    return {rng.choice(WORDS) + str(i): random_doc(rng, depth - 1)
            for i in range(rng.randint(0, 6))}


def json_roundtrip(rng):
    check = 0
    for _ in range(300):
        doc = random_doc(rng, 6)
        out = []
        encode(doc, out)
        s = "".join(out)
        back = Parser(s).value()
        assert back == doc, "json round trip"
        check = (check * 31 + len(s)) % (1 << 61)
    return check


def numbers():
    f = 1
    for i in range(2, 1500):
        f *= i
    digits = sum(int(c) for c in str(f))
    fib = [0, 1]
    for i in range(5000):
        fib.append(fib[-1] + fib[-2])
    n = 2500  # doubling identity: F(2n) = F(n) * (2 F(n+1) - F(n))
    assert fib[2 * n] == fib[n] * (2 * fib[n + 1] - fib[n]), "fibonacci"
    return digits, fib[-1] % 1000000007


def collections_churn(rng):
    data = [(rng.randint(0, 1000), rng.random(), str(i)) for i in range(100000)]
    data.sort()
    assert all(data[i] <= data[i + 1] for i in range(len(data) - 1)), "sort"
    groups = {}
    for k, r, s in data:
        groups.setdefault(k % 97, []).append(s)
    sizes = sorted(len(v) for v in groups.values())
    uniq = set(s[-2:] for _, _, s in data)
    return sizes[0], sizes[-1], len(uniq)


def main():
    rng = random.Random(1234)
    results = []
    for _ in range(ROUNDS):
        results.append(trees())
        results.append(text(rng))
        results.append(json_roundtrip(rng))
        results.append(numbers())
        results.append(collections_churn(rng))
    h = 0
    for r in results:
        for ch in repr(r):
            h = (h * 131 + ord(ch)) % (1 << 61)
    print("pywork: ok checksum=%x" % h)
    return 0


if __name__ == "__main__":
    sys.exit(main())
