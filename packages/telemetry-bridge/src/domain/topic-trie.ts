/**
 * Subscription index: a segment trie, so matching cost does not grow with the number of subscriptions.
 * `*` matches exactly one segment; `**` matches one or more trailing segments, so `a.**` does not match `a`
 * (NATS `>` semantics, docs/protocol.md "Patterns"). Matching walks at most (segments × 3) branches, independent of how
 * many subscriptions exist.
 */
interface TrieNode<T> {
  children: Map<string, TrieNode<T>>;
  star: TrieNode<T> | undefined;
  /** Values whose pattern ends exactly here. */
  values: Set<T>;
  /** Values whose pattern is `<this node>.**`. */
  tail: Set<T>;
}

function node<T>(): TrieNode<T> {
  return { children: new Map(), star: undefined, values: new Set(), tail: new Set() };
}

export class TopicTrie<T> {
  readonly #root: TrieNode<T> = node();
  #size = 0;

  get size(): number {
    return this.#size;
  }

  /** Add `value` under `pattern` (already validated); returns false if it was already there. */
  add(pattern: string, value: T): boolean {
    let n = this.#root;
    const segments = pattern.split('.');
    for (let i = 0; i < segments.length; i++) {
      const s = segments[i] as string;
      if (s === '**') {
        if (n.tail.has(value)) return false;
        n.tail.add(value);
        this.#size++;
        return true;
      }
      if (s === '*') n = n.star ??= node();
      else {
        let c = n.children.get(s);
        if (!c) n.children.set(s, (c = node()));
        n = c;
      }
    }
    if (n.values.has(value)) return false;
    n.values.add(value);
    this.#size++;
    return true;
  }

  remove(pattern: string, value: T): boolean {
    const segments = pattern.split('.');
    const trail: { parent: TrieNode<T>; key: string }[] = [];
    let n = this.#root;
    let removed = false;
    for (let i = 0; i < segments.length; i++) {
      const s = segments[i] as string;
      if (s === '**') {
        removed = n.tail.delete(value);
        break;
      }
      const next = s === '*' ? n.star : n.children.get(s);
      if (!next) return false;
      trail.push({ parent: n, key: s });
      n = next;
      if (i === segments.length - 1) removed = n.values.delete(value);
    }
    if (!removed) return false;
    this.#size--;
    // Prune empty nodes so a churn of subscriptions does not leave the trie growing.
    for (let i = trail.length - 1; i >= 0; i--) {
      const { parent, key } = trail[i] as { parent: TrieNode<T>; key: string };
      const child = key === '*' ? parent.star : parent.children.get(key);
      if (!child || child.values.size || child.tail.size || child.children.size || child.star) break;
      if (key === '*') parent.star = undefined;
      else parent.children.delete(key);
    }
    return true;
  }

  /** Every value with a pattern matching the concrete `path`, each once. */
  match(path: string, out: Set<T> = new Set()): Set<T> {
    this.#walk(this.#root, path.split('.'), 0, out);
    return out;
  }

  #walk(n: TrieNode<T>, segments: string[], i: number, out: Set<T>): void {
    if (i === segments.length) {
      for (const v of n.values) out.add(v);
      return;
    }
    // `**` here needs at least one more segment, which there is (i < length).
    for (const v of n.tail) out.add(v);
    const c = n.children.get(segments[i] as string);
    if (c) this.#walk(c, segments, i + 1, out);
    if (n.star) this.#walk(n.star, segments, i + 1, out);
  }
}

/** Reference matcher used by tests and by replay filtering: same semantics, no index. */
export function patternMatches(pattern: string, path: string): boolean {
  const p = pattern.split('.');
  const s = path.split('.');
  for (let i = 0; i < p.length; i++) {
    const seg = p[i];
    if (seg === '**') return s.length > i;
    if (i >= s.length) return false;
    if (seg !== '*' && seg !== s[i]) return false;
  }
  return p.length === s.length;
}
