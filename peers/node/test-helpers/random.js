// Seeded randomness for the differential tests: the same cases on every run, so a failure names a seed and a case
// that show it again.

/** A seeded generator of numbers in [0, 1) (mulberry32). */
export function generator(seed) {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 0x100000000;
  };
}
