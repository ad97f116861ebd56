#!/usr/bin/env python3
"""Host emulation of the tensor-core attention kernels' fragment arithmetic.

Replays, lane by lane, what attention_mma.cuh, attention_decode_tc.cuh and
attention_prefill_tc.cuh do (and checks attention_kv_convert.cuh's fp8 tile index math) (swizzled cp.async tiles, ldmatrix / ldmatrix.trans, the
mma.m16n8k16 fragment layouts of the PTX ISA, the online softmax with quad shuffles, the
warp merge) in float64 and compares with plain attention. Any layout or index slip shows
as an error far above 1e-12. Needs numpy; no GPU. Run: python3 kernels/cuda/mma_layout_emulator.py
Keep it in step with the kernels when their index math changes.
"""
import numpy as np
rng = np.random.default_rng(0)

def swz(row, chunk, HD):  # element offset
    return row * HD + ((chunk ^ (row & 7)) << 3)

def ldmatrix_x4(smem, addrs, trans):
    # addrs[lane] = element offset of row (lane%8) of matrix lane//8 ; each row 8 elems
    # returns regs[lane][i] = (lo, hi) pair
    regs = [[None]*4 for _ in range(32)]
    for i in range(4):
        mat = np.array([smem[addrs[8*i + r]: addrs[8*i + r] + 8] for r in range(8)])  # [8 rows][8 cols]
        for lane in range(32):
            g, t = lane >> 2, lane & 3
            if not trans:
                regs[lane][i] = (mat[g][2*t], mat[g][2*t+1])
            else:
                regs[lane][i] = (mat[2*t][g], mat[2*t+1][g])
    return regs

def mma(d, a, b0, b1):
    # d[lane][4], a[lane][4] pairs, b0/b1[lane] pairs. Build A(16x16), B(16x8) then scatter.
    A = np.zeros((16, 16)); B = np.zeros((16, 8))
    for lane in range(32):
        g, t = lane >> 2, lane & 3
        A[g][2*t:2*t+2] = a[lane][0]; A[g+8][2*t:2*t+2] = a[lane][1]
        A[g][2*t+8:2*t+10] = a[lane][2]; A[g+8][2*t+8:2*t+10] = a[lane][3]
        B[2*t][g], B[2*t+1][g] = b0[lane]; B[2*t+8][g], B[2*t+9][g] = b1[lane]
    C = A @ B
    for lane in range(32):
        g, t = lane >> 2, lane & 3
        d[lane][0] += C[g][2*t]; d[lane][1] += C[g][2*t+1]
        d[lane][2] += C[g+8][2*t]; d[lane][3] += C[g+8][2*t+1]

def quad_max(vals):  # vals[lane]
    out = list(vals)
    for off in (1, 2):
        out = [max(out[l], out[l ^ off]) for l in range(32)]
    return out

def load_q_frag(qrows_lo, qrows_hi, HD):  # per lane row arrays or None
    qa = [[[None]*4 for _ in range(HD//16)] for _ in range(32)]
    for lane in range(32):
        t = lane & 3
        def ld(row, col):
            return (0.0, 0.0) if row is None else (row[col], row[col+1])
        for kk in range(HD//16):
            qa[lane][kk][0] = ld(qrows_lo[lane], 16*kk + 2*t)
            qa[lane][kk][1] = ld(qrows_hi[lane], 16*kk + 2*t)
            qa[lane][kk][2] = ld(qrows_lo[lane], 16*kk + 8 + 2*t)
            qa[lane][kk][3] = ld(qrows_hi[lane], 16*kk + 8 + 2*t)
    return qa

def load_kv_tile(sk, sv, kplane, vplane, table, lbs, slot_stride, head_off, base, end, TN, HD, nthreads, tids):
    CPR = HD // 8; chunks = TN * CPR
    for tid in tids:
        for it in range(chunks // nthreads):
            i = tid + it * nthreads
            row, chunk = i // CPR, i % CPR
            pos = base + row
            dst = swz(row, chunk, HD)
            if pos < end:
                slot = (table[pos >> lbs] << lbs) + (pos & ((1 << lbs) - 1))
                off = slot * slot_stride + head_off + chunk * 8
                sk[dst:dst+8] = kplane[off:off+8]; sv[dst:dst+8] = vplane[off:off+8]
            else:
                sk[dst:dst+8] = 0; sv[dst:dst+8] = 0

class WarpState:
    def __init__(s, HD):
        s.m = [[-np.inf, -np.inf] for _ in range(32)]
        s.l = [[0.0, 0.0] for _ in range(32)]
        s.o = [[[0.0]*4 for _ in range(HD//8)] for _ in range(32)]

def attend_tile(st, qa, sk, sv, base, limit, scale, HD, TN):
    kN = TN // 8
    s = [[[0.0]*4 for _ in range(kN)] for _ in range(32)]
    for kk in range(HD // 16):
        for np_ in range(kN // 2):
            addrs = []
            for lane in range(32):
                r8, mat = lane & 7, lane >> 3
                row = 16*np_ + r8 + ((mat >> 1) << 3); chunk = 2*kk + (mat & 1)
                addrs.append(swz(row, chunk, HD))
            b = ldmatrix_x4(sk, addrs, False)
            d0 = [s[l][2*np_] for l in range(32)]; d1 = [s[l][2*np_+1] for l in range(32)]
            mma(d0, [qa[l][kk] for l in range(32)], [b[l][0] for l in range(32)], [b[l][1] for l in range(32)])
            mma(d1, [qa[l][kk] for l in range(32)], [b[l][2] for l in range(32)], [b[l][3] for l in range(32)])
    for r in range(2):
        mx = [-np.inf]*32
        for lane in range(32):
            t = lane & 3
            for n in range(kN):
                for x in range(2):
                    pos = base + 8*n + 2*t + x
                    v = s[lane][n][2*r+x] * scale if pos <= limit[lane][r] else -np.inf
                    s[lane][n][2*r+x] = v; mx[lane] = max(mx[lane], v)
        mx = quad_max(mx)
        for lane in range(32):
            m_new = max(st.m[lane][r], mx[lane])
            m_ref = 0.0 if m_new == -np.inf else m_new
            corr = 2.0 ** (st.m[lane][r] - m_ref)
            st.m[lane][r] = m_new; st.l[lane][r] *= corr
            for j in range(HD//8):
                st.o[lane][j][2*r] *= corr; st.o[lane][j][2*r+1] *= corr
            for n in range(kN):
                for x in range(2):
                    p = 2.0 ** (s[lane][n][2*r+x] - m_ref)
                    s[lane][n][2*r+x] = p; st.l[lane][r] += p
    for kp in range(TN // 16):
        pa = [[(s[l][2*kp][0], s[l][2*kp][1]), (s[l][2*kp][2], s[l][2*kp][3]),
               (s[l][2*kp+1][0], s[l][2*kp+1][1]), (s[l][2*kp+1][2], s[l][2*kp+1][3])] for l in range(32)]
        for jp in range(HD // 16):
            addrs = []
            for lane in range(32):
                r8, mat = lane & 7, lane >> 3
                row = 16*kp + r8 + ((mat & 1) << 3); chunk = 2*jp + (mat >> 1)
                addrs.append(swz(row, chunk, HD))
            b = ldmatrix_x4(sv, addrs, True)
            d0 = [st.o[l][2*jp] for l in range(32)]; d1 = [st.o[l][2*jp+1] for l in range(32)]
            mma(d0, pa, [b[l][0] for l in range(32)], [b[l][1] for l in range(32)])
            mma(d1, pa, [b[l][2] for l in range(32)], [b[l][3] for l in range(32)])

def finish_sums(st):
    for r in range(2):
        v = [st.l[l][r] for l in range(32)]
        for off in (1, 2):
            v = [v[l] + v[l ^ off] for l in range(32)]
        for l in range(32): st.l[l][r] = v[l]

def reference(q, kplane, vplane, table, bs, nkv, HD, kv_head, pos_lo, pos_hi, limit, scale):
    keys = range(pos_lo, min(pos_hi, limit + 1))
    rows = []
    for p in keys:
        slot = table[p // bs] * bs + p % bs
        off = slot * nkv * HD + kv_head * HD
        rows.append((kplane[off:off+HD], vplane[off:off+HD]))
    K = np.array([r[0] for r in rows]); V = np.array([r[1] for r in rows])
    sc = K @ q * scale
    w = np.exp(sc - sc.max()); w /= w.sum()
    return w @ V

def cache(num_blocks, bs, nkv, HD):
    n = num_blocks * bs * nkv * HD
    return rng.standard_normal(n), rng.standard_normal(n)

def decode_cta(HD, bs, group, nkv, ctx, kv_begin, kv_end, chunk_idx=0):
    num_blocks = (ctx + bs - 1) // bs + 3
    kplane, vplane = cache(num_blocks, bs, nkv, HD)
    table = list(rng.permutation(num_blocks))
    nh = group * nkv
    kv_head = nkv - 1
    q = rng.standard_normal((nh, HD))
    scale = 1 / np.sqrt(HD)
    scale_log2 = scale * np.log2(np.e)
    head0 = kv_head * group + chunk_idx * 16
    rows = min(16, group - chunk_idx * 16)
    lbs = bs.bit_length() - 1
    WARPS, TILE = 4, 16
    states = []
    ntiles = (kv_end - kv_begin + TILE - 1) // TILE
    for warp in range(WARPS):
        lo = [q[head0 + (l >> 2)] if (l >> 2) < rows else None for l in range(32)]
        hi = [q[head0 + (l >> 2) + 8] if (l >> 2) + 8 < rows else None for l in range(32)]
        qa = load_q_frag(lo, hi, HD)
        limit = [[kv_end - 1 if (l >> 2) < rows else -1, kv_end - 1 if (l >> 2) + 8 < rows else -1] for l in range(32)]
        st = WarpState(HD)
        for tile in range(warp, ntiles, WARPS):
            sk = np.full(TILE * HD, np.nan); sv = np.full(TILE * HD, np.nan)
            load_kv_tile(sk, sv, kplane, vplane, table, lbs, nkv * HD, kv_head * HD,
                         kv_begin + tile * TILE, kv_end, TILE, HD, 32, range(32))
            attend_tile(st, qa, sk, sv, kv_begin + tile * TILE, limit, scale_log2, HD, TILE)
        finish_sums(st)
        # StoreWarpState
        buf = np.zeros(16 * HD + 32)
        for lane in range(32):
            g, t = lane >> 2, lane & 3
            for j in range(HD // 8):
                for e in range(4):
                    buf[(g + 8 * (e >> 1)) * HD + 8 * j + 2 * t + (e & 1)] = st.o[lane][j][e]
            if t == 0:
                buf[16*HD + g] = st.m[lane][0]; buf[16*HD + g + 8] = st.m[lane][1]
                buf[16*HD + 16 + g] = st.l[lane][0]; buf[16*HD + 16 + g + 8] = st.l[lane][1]
        states.append(buf)
    err = 0
    for row in range(rows):
        m = max(s[16*HD + row] for s in states)
        l = sum(s[16*HD + 16 + row] * 2.0 ** (s[16*HD + row] - m) for s in states)
        o = sum(s[row*HD:(row+1)*HD] * 2.0 ** (s[16*HD + row] - m) for s in states) / l
        ref = reference(q[head0 + row], kplane, vplane, table, bs, nkv, HD, kv_head, kv_begin, kv_end, kv_end - 1, scale)
        err = max(err, np.abs(o - ref).max())
    return err

def prefill_cta(HD, bs, group, nkv, prefix, ntok):
    ctx = prefix + ntok
    num_blocks = (ctx + bs - 1) // bs + 3
    kplane, vplane = cache(num_blocks, bs, nkv, HD)
    table = list(rng.permutation(num_blocks))
    nh = group * nkv; kv_head = 0
    tile_tokens = max(1, 64 // group); ntok = min(ntok, tile_tokens)
    positions = [prefix + j for j in range(ntok)]
    kv_end = positions[-1] + 1
    q = rng.standard_normal((ntok, nh, HD))
    scale = 1 / np.sqrt(HD); scale_log2 = scale * np.log2(np.e)
    lbs = bs.bit_length() - 1
    TILE = 32
    ntiles = (kv_end + TILE - 1) // TILE
    # shared tiles
    tiles = []
    for i in range(ntiles):
        sk = np.full(TILE * HD, np.nan); sv = np.full(TILE * HD, np.nan)
        load_kv_tile(sk, sv, kplane, vplane, table, lbs, nkv * HD, kv_head * HD, i * TILE, kv_end, TILE, HD, 128, range(128))
        tiles.append((sk, sv))
    err = 0
    for warp in range(4):
        qlo, qhi, limit, meta = [], [], [], []
        for lane in range(32):
            g = lane >> 2
            rowinfo = []
            for r in range(2):
                row = 16 * warp + g + 8 * r
                j, h = row // group, row % group
                if j < ntok:
                    rowinfo.append((q[j, kv_head * group + h], positions[j], (j, kv_head * group + h)))
                else:
                    rowinfo.append((None, -1, None))
            qlo.append(rowinfo[0][0]); qhi.append(rowinfo[1][0])
            limit.append([rowinfo[0][1], rowinfo[1][1]]); meta.append([rowinfo[0][2], rowinfo[1][2]])
        qa = load_q_frag(qlo, qhi, HD)
        wl = max(max(x) for x in limit)
        st = WarpState(HD)
        for i in range(ntiles):
            if i * TILE <= wl:
                attend_tile(st, qa, tiles[i][0], tiles[i][1], i * TILE, limit, scale_log2, HD, TILE)
        finish_sums(st)
        for lane in range(32):
            t = lane & 3
            for r in range(2):
                if meta[lane][r] is None: continue
                j, head = meta[lane][r]
                ref = reference(q[j, head], kplane, vplane, table, bs, nkv, HD, kv_head, 0, kv_end, positions[j], scale)
                for jj in range(HD // 8):
                    for x in range(2):
                        d = 8 * jj + 2 * t + x
                        got = st.o[lane][jj][2*r + x] / st.l[lane][r]
                        err = max(err, abs(got - ref[d]))
    return err

def fp8_loader_mismatch(HD, TN, nthreads, bs, ctx, base):
    """attention_kv_convert.cuh's fp8 path: LoadFp8KvTile copies 16-element pieces
    unswizzled (piece i at raw[16 i]); ConvertFp8KvTile turns piece i's bytes, as four
    32-bit words of two pairs each, into T chunks 2 p and 2 p + 1 of its row at their
    swizzled places. The T tiles must equal what load_kv_tile makes of the same (already
    e4m3-valued) planes. Returns the number of differing elements."""
    nkv, kv_head = 2, 1
    nblocks = (ctx + bs - 1) // bs + 2
    kplane, vplane = cache(nblocks, bs, nkv, HD)
    table = list(rng.permutation(nblocks))
    lbs = bs.bit_length() - 1
    want_k, want_v = np.zeros(TN * HD), np.zeros(TN * HD)
    load_kv_tile(want_k, want_v, kplane, vplane, table, lbs, nkv * HD, kv_head * HD, base, ctx,
                 TN, HD, nthreads, range(nthreads))
    PPR = HD // 16; pieces = TN * PPR
    rk, rv = np.full(TN * HD, np.nan), np.full(TN * HD, np.nan)
    for tid in range(nthreads):  # LoadFp8KvTile
        for it in range(pieces // nthreads):
            i = tid + it * nthreads
            pos = base + i // PPR
            if pos < ctx:
                slot = (table[pos >> lbs] << lbs) + (pos & ((1 << lbs) - 1))
                off = slot * nkv * HD + kv_head * HD + (i % PPR) * 16
                rk[16*i:16*i+16] = kplane[off:off+16]; rv[16*i:16*i+16] = vplane[off:off+16]
            else:
                rk[16*i:16*i+16] = 0; rv[16*i:16*i+16] = 0
    sk, sv = np.full(TN * HD, np.nan), np.full(TN * HD, np.nan)
    for tid in range(nthreads):  # ConvertFp8KvTile
        for it in range(pieces // nthreads):
            i = tid + it * nthreads
            row, piece = i // PPR, i % PPR
            for raw, tile in ((rk, sk), (rv, sv)):
                elems = raw[16*i:16*i+16]  # byte b of word w is element 4 w + b
                words = [elems[4*w:4*w+4] for w in range(4)]
                for c in range(2):
                    pairs = [words[2*c][0:2], words[2*c][2:4], words[2*c+1][0:2], words[2*c+1][2:4]]
                    dst = swz(row, 2 * piece + c, HD)
                    tile[dst:dst+8] = np.concatenate(pairs)
    return int(np.sum(sk != want_k) + np.sum(sv != want_v))

if __name__ == "__main__":
    for args in [(64, 16, 32, 16, 100, 32), (128, 16, 32, 1, 300, 288), (128, 32, 128, 64, 50, 32),
                 (64, 32, 128, 256, 70, 0)]:
        bad = fp8_loader_mismatch(*args)
        print(f"fp8 tiles hd{args[0]} tile {args[1]} threads {args[2]} block {args[3]}: "
              f"{bad} elements differ")
        if bad:
            raise SystemExit(1)
    worst = 0.0
    for name, err in [
        ("decode hd64 bs16 group8", decode_cta(64, 16, 8, 2, 100, 0, 100)),
        ("decode hd128 bs1 group4 partial range", decode_cta(128, 1, 4, 2, 300, 96, 211)),
        ("decode hd64 bs32 group32 second chunk", decode_cta(64, 32, 32, 1, 50, 0, 50, chunk_idx=1)),
        ("decode context 1", decode_cta(64, 16, 1, 1, 1, 0, 1)),
        ("prefill hd64 group8 after prefix", prefill_cta(64, 16, 8, 2, 20, 8)),
        ("prefill hd128 group1", prefill_cta(128, 32, 1, 2, 40, 64)),
        ("prefill hd64 group3", prefill_cta(64, 16, 3, 1, 0, 21)),
    ]:
        print(f"{name}: max abs error {err:.3g}")
        worst = max(worst, err)
    raise SystemExit(0 if worst < 1e-12 else 1)
