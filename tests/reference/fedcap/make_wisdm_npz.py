#!/usr/bin/env python3
"""Build the per-client WISDM files that FedCAP's code (youpengl/FedCAP, PFLlib layout) reads, from the
transformed WISDM ARFF, so that its clients hold exactly the samples Bastion's clients hold.

FedCAP's code reads dataset/processed/wisdm/{train,test}/<client>.npz, each an npz whose key 'data'
holds a pickled dict {'x': float array, 'y': int array} (system/utils/data_utils.py). Its own generator
(dataset/generate_wisdm.py) is not in the repository and it expects the raw accelerometer file, which
this project does not have (/work/shared/datasets/wisdm/SOURCE.md). So this script writes the files
from the ARFF features (43 per 10 s window), preprocessed the way Bastion's `wisdm-features` set is:

- rows in file order; '?' (XPEAK/YPEAK/ZPEAK) replaced by the column's mean over the rows that have it
  (data/wisdm.cpp impute_missing; values parsed as float32, mean accumulated in double);
- one scalar mean and std over all 5418 x 43 values (Bastion's per-channel statistics of a C=1 set,
  data/dataset.cpp compute_channel_stats, population variance), applied as (x - mean) / std in float32;
- clients = WISDM users in increasing id order (partition `natural`); each client's local test split =
  floor(0.3 n + 1e-9) of its samples chosen by Bastion's seeded shuffle (data/partition.cpp
  split_client_test with the run's partition seed Generator(seed).fork(1).next_u64(), stream 7,
  xoshiro256** seeded through splitmix64, tensor/random.h), train and test each in index order;
- Bastion's attackers for `--count` malicious clients = choose_malicious(36, count, random,
  Generator(seed).fork(2)) (fl/core/sampling.cpp).

FedCAP's code picks its attackers itself: np.random.seed(seed) then
np.sort(np.random.choice(np.arange(36), int(36 * 0.3), replace=False)) (serverbase.set_clients; nothing
draws from numpy before it). The files are laid out so that the code's attacker ids hold Bastion's
attackers' data: code client k gets the data of Bastion client pi(k), where pi maps the code's sorted
attacker ids onto Bastion's sorted attacker ids and the code's sorted benign ids onto Bastion's sorted
benign ids. Benign users, their samples and their order are then the same on both sides. mapping.json
records pi, the users and both attacker sets.

Usage: make_wisdm_npz.py ARFF OUTDIR --seed S [--count 10] [--test-fraction 0.3]
       [--check-partition-csv CSV]  (compare with `bastion data stats --out CSV` at the partition seed)
"""
import argparse
import json
import math
import os
import sys

import numpy as np

M64 = (1 << 64) - 1
ACTIVITIES = ["Walking", "Jogging", "Upstairs", "Downstairs", "Sitting", "Standing"]


def _rotl(x, k):
    return ((x << k) | (x >> (64 - k))) & M64


def _mix(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


class Generator:
    """Bastion's tensor/random.h Generator (xoshiro256**, splitmix64 seeding, fork, below)."""

    def __init__(self, seed):
        x = seed & M64
        self.s = []
        for _ in range(4):
            x = (x + 0x9E3779B97F4A7C15) & M64
            self.s.append(_mix(x))

    def fork(self, stream):
        return Generator(self.s[0] ^ _mix((stream + 0x9E3779B97F4A7C15) & M64))

    def next_u64(self):
        s = self.s
        result = (_rotl((s[1] * 5) & M64, 7) * 9) & M64
        t = (s[1] << 17) & M64
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = _rotl(s[3], 45)
        return result

    def below(self, n):
        m = self.next_u64() * n
        low = m & M64
        if low < n:
            threshold = ((1 << 64) - n) % n
            while low < threshold:
                m = self.next_u64() * n
                low = m & M64
        return m >> 64


def shuffle_indices(values, rng):
    for i in range(len(values), 1, -1):
        j = rng.below(i)
        values[i - 1], values[j] = values[j], values[i - 1]


def read_arff(path):
    users, labels, rows = [], [], []
    in_data = False
    with open(path, "r", newline="") as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("%"):
                continue
            if not in_data:
                if line.lower().startswith("@data"):
                    in_data = True
                continue
            fields = [x.strip() for x in line.split(",")]
            if len(fields) != 46:
                raise ValueError(f"{path}: expected 46 fields, got {len(fields)}: {line[:80]}")
            users.append(int(fields[1]))
            labels.append(ACTIVITIES.index(fields[45].strip('"')))
            rows.append([np.nan if v == "?" else float(np.float32(v)) for v in fields[2:45]])
    x = np.array(rows, dtype=np.float32)
    for c in range(x.shape[1]):  # impute: column mean over present rows, double sum, stored as float32
        col = x[:, c]
        miss = np.isnan(col)
        if miss.any():
            present = col[~miss].astype(np.float64)
            col[miss] = np.float32(present.sum() / len(present)) if len(present) else np.float32(0)
    v = x.astype(np.float64).ravel()
    mean = v.sum() / v.size
    var = max((v * v).sum() / v.size - mean * mean, 0.0)
    mean32, std32 = np.float32(mean), np.float32(math.sqrt(var) if var > 0 else 1.0)
    xn = ((x - mean32) / std32).astype(np.float32)
    return np.array(users), np.array(labels, dtype=np.int64), xn, float(mean32), float(std32)


def bastion_partition(users, seed, fraction):
    part_seed = Generator(seed).fork(1).next_u64()
    ids = sorted(set(users.tolist()))
    lists = [[] for _ in ids]
    pos = {u: k for k, u in enumerate(ids)}
    for i, u in enumerate(users.tolist()):
        lists[pos[u]].append(i)
    base = Generator(part_seed).fork(7)
    train, test = [], []
    for j, lst in enumerate(lists):
        count = int(math.floor(fraction * len(lst) + 1e-9))
        rng = base.fork(j)
        lst = sorted(lst)
        shuffle_indices(lst, rng)
        test.append(sorted(lst[len(lst) - count:]))
        train.append(sorted(lst[:len(lst) - count]))
    return ids, train, test, part_seed


def bastion_malicious(clients, count, seed):
    rng = Generator(seed).fork(2)
    pool = list(range(clients))
    for i in range(count):
        j = i + rng.below(clients - i)
        pool[i], pool[j] = pool[j], pool[i]
    return sorted(pool[:count])


def code_malicious(clients, ratio, seed):
    np.random.seed(seed)
    return sorted(np.random.choice(np.arange(clients), int(clients * ratio), replace=False).tolist())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("arff")
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, required=True, help="Bastion run seed = the code's --seed")
    ap.add_argument("--count", type=int, default=10, help="attackers: the code's int(36 * 0.3) = 10")
    ap.add_argument("--ratio", type=float, default=0.3, help="the code's --attack_ratio")
    ap.add_argument("--test-fraction", type=float, default=0.3)
    ap.add_argument("--check-partition-csv", help="bastion data stats --out CSV at the partition seed")
    a = ap.parse_args()

    users, y, x, mean, std = read_arff(a.arff)
    ids, train, test, part_seed = bastion_partition(users, a.seed, a.test_fraction)
    n = len(ids)
    bad_b = bastion_malicious(n, a.count, a.seed)
    bad_c = code_malicious(n, a.ratio, a.seed)
    if len(bad_c) != len(bad_b):
        sys.exit(f"the code picks {len(bad_c)} attackers, --count is {len(bad_b)}")
    good_b = [c for c in range(n) if c not in bad_b]
    good_c = [c for c in range(n) if c not in bad_c]
    pi = {}
    for k, b in zip(bad_c, bad_b):
        pi[k] = b
    for k, b in zip(good_c, good_b):
        pi[k] = b

    if a.check_partition_csv:
        import csv
        with open(a.check_partition_csv) as f:
            rows = list(csv.DictReader(f))
        bad = 0
        for j, r in enumerate(rows):
            hist = np.bincount(y[train[j]], minlength=6).tolist()
            want = [int(r[f"class_{c}"]) for c in range(6)]
            if int(r["size"]) != len(train[j]) or int(r["test_size"]) != len(test[j]) or hist != want:
                bad += 1
                print(f"client {j}: bastion size {r['size']}/{r['test_size']} {want}, here "
                      f"{len(train[j])}/{len(test[j])} {hist}")
        print(f"partition check against {a.check_partition_csv}: {len(rows) - bad}/{len(rows)} clients agree")
        if bad:
            sys.exit(1)

    for sub in ("train", "test"):
        os.makedirs(os.path.join(a.out, sub), exist_ok=True)
    for k in range(n):
        b = pi[k]
        for sub, idx in (("train", train[b]), ("test", test[b])):
            idx = np.array(idx, dtype=np.int64)
            with open(os.path.join(a.out, sub, f"{k}.npz"), "wb") as f:
                np.savez_compressed(f, data={"x": x[idx], "y": y[idx]})
    info = {
        "seed": a.seed, "partition_seed": str(part_seed), "test_fraction": a.test_fraction,
        "normalisation": {"mean": mean, "std": std}, "features": int(x.shape[1]),
        "code_malicious_ids": bad_c, "bastion_malicious_clients": bad_b,
        "code_client_to_bastion_client": [pi[k] for k in range(n)],
        "code_client_to_wisdm_user": [ids[pi[k]] for k in range(n)],
        "train_sizes": [len(train[pi[k]]) for k in range(n)],
        "test_sizes": [len(test[pi[k]]) for k in range(n)],
    }
    with open(os.path.join(a.out, "mapping.json"), "w") as f:
        json.dump(info, f, indent=1)
    print(f"wrote {n} clients to {a.out}: {sum(info['train_sizes'])} train / {sum(info['test_sizes'])} test, "
          f"mean {mean:.6g} std {std:.6g}, code attackers {bad_c} = bastion clients {bad_b}")


if __name__ == "__main__":
    main()
