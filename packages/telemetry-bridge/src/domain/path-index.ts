/**
 * Index of the stored keys by segment, so a snapshot finds the keys matching a pattern by walking only the
 * branches the pattern can reach (`*` = every child of one level, `**` = every key below), never by testing
 * every key against every pattern.
 */
interface Node {
  children: Map<string, Node>;
  /** Set when a stored key ends at this node. */
  path: string | undefined;
}

const node = (): Node => ({ children: new Map(), path: undefined });

export class PathIndex {
  readonly #root = node();

  add(path: string): void {
    let n = this.#root;
    for (const s of path.split('.')) {
      let c = n.children.get(s);
      if (!c) n.children.set(s, (c = node()));
      n = c;
    }
    n.path = path;
  }

  remove(path: string): void {
    const segs = path.split('.');
    const trail: Node[] = [this.#root];
    let n = this.#root;
    for (const s of segs) {
      const c = n.children.get(s);
      if (!c) return;
      trail.push(c);
      n = c;
    }
    n.path = undefined;
    // Prune empty branches so key churn does not grow the index.
    for (let i = segs.length; i > 0; i--) {
      const child = trail[i] as Node;
      if (child.path !== undefined || child.children.size > 0) break;
      (trail[i - 1] as Node).children.delete(segs[i - 1] as string);
    }
  }

  /** Add every stored key matching `pattern` (validated: `*` one segment, `**` trailing only) to `out`. */
  match(pattern: string, out: Set<string>): void {
    this.#walk(this.#root, pattern.split('.'), 0, out);
  }

  #walk(n: Node, segs: string[], i: number, out: Set<string>): void {
    if (i === segs.length) {
      if (n.path !== undefined) out.add(n.path);
      return;
    }
    const s = segs[i] as string;
    if (s === '**') {
      for (const c of n.children.values()) this.#all(c, out);
    } else if (s === '*') {
      for (const c of n.children.values()) this.#walk(c, segs, i + 1, out);
    } else {
      const c = n.children.get(s);
      if (c) this.#walk(c, segs, i + 1, out);
    }
  }

  #all(n: Node, out: Set<string>): void {
    if (n.path !== undefined) out.add(n.path);
    for (const c of n.children.values()) this.#all(c, out);
  }
}
