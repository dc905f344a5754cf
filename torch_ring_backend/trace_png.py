"""A picture of a job's flight-recorder dumps, with no plotting library: one row per rank, time
left to right, each collective a bar. The light part of a bar is the time the rank had issued
the collective but was waiting for the last rank to issue it (the wait a straggler causes). The
dark part runs from the last rank's issue to this rank's completion. Red marks a collective that
never completed; one that some rank never issued stays light to the end, with a red core. The rank number is drawn at the left of each row. Written as an 8-bit RGB PNG
(zlib and struct only)."""
import struct
import zlib

WIDTH = 1200
ROW = 22
GAP = 8
LEFT = 40
WAIT = (200, 200, 215)
MOVE = (40, 90, 200)
STUCK = (210, 40, 40)
INK = (20, 20, 20)
# 3x5 digits, one string of 15 bits per digit, row by row.
_DIGITS = ["111101101101111", "010110010010111", "111001111100111", "111001111001111",
           "101101111001001", "111100111001111", "111100111101111", "111001001001001",
           "111101111101111", "111101111001111"]


def _spans(dumps):
    """Per rank, (issued, all issued or None, ended or None) in ns for each collective in the
    dumps."""
    issued = {}
    for rank, d in dumps.items():
        for e in d["entries"]:
            issued.setdefault((e["process_group"][0], e["collective_seq_id"]), {})[rank] = e
    rows = {rank: [] for rank in dumps}
    for per_rank in issued.values():
        # None: some rank never issued it, so its ranks waited from their issue on.
        last_issue = (max(e["time_created_ns"] for e in per_rank.values())
                      if len(per_rank) == len(dumps) else None)
        for rank, e in per_rank.items():
            rows[rank].append((e["time_created_ns"], last_issue, e["time_discovered_completed_ns"]))
    return rows


def render(dumps):
    """The PNG's bytes."""
    rows = _spans(dumps)
    times = [t for spans in rows.values() for s in spans for t in s if t is not None]
    t0, t1 = min(times), max(times)
    t1 = t1 + max(1, (t1 - t0) // 50)  # room for bars that never ended
    scale = (WIDTH - LEFT - 10) / (t1 - t0)
    ranks = sorted(rows)
    height = GAP + len(ranks) * (ROW + GAP)
    px = [[(255, 255, 255)] * WIDTH for _ in range(height)]

    def fill(x0, x1, y0, y1, color):
        for y in range(max(0, y0), min(height, y1)):
            line = px[y]
            for x in range(max(0, x0), min(WIDTH, x1)):
                line[x] = color

    def x_of(t):
        return LEFT + int((t - t0) * scale)

    for i, rank in enumerate(ranks):
        top = GAP + i * (ROW + GAP)
        for d, ch in enumerate(str(rank)):
            bits = _DIGITS[int(ch)]
            for b, on in enumerate(bits):
                if on == "1":
                    x, y = 8 + d * 12 + (b % 3) * 3, top + 4 + (b // 3) * 3
                    fill(x, x + 3, y, y + 3, INK)
        for issued, last, ended in sorted(rows[rank], key=lambda s: s[0]):
            if last is None:  # waiting for a rank that never came: light, with a red core
                fill(x_of(issued), WIDTH - 10, top, top + ROW, WAIT)
                fill(x_of(issued), WIDTH - 10, top + ROW // 2 - 2, top + ROW // 2 + 2, STUCK)
                continue
            fill(x_of(issued), max(x_of(last), x_of(issued) + 1), top, top + ROW, WAIT)
            end = x_of(ended) if ended is not None else WIDTH - 10
            fill(x_of(last), max(end, x_of(last) + 1), top + 3, top + ROW - 3,
                 MOVE if ended is not None else STUCK)
    raw = b"".join(b"\x00" + bytes(c for p in line for c in p) for line in px)

    def chunk(kind, data):
        return (struct.pack(">I", len(data)) + kind + data +
                struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    return (b"\x89PNG\r\n\x1a\n" +
            chunk(b"IHDR", struct.pack(">IIBBBBB", WIDTH, height, 8, 2, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b""))
