/**
 * The repository's import graph and its cycles, for scripts/test/app/import-cycles.test.ts (docs/ARCHITECTURE.md
 * "No import cycles").
 *
 * Every import the TypeScript scanner sees is an edge: `import`, `import type`, `export ... from`, a dynamic
 * `import('...')` with a string literal and `typeof import('...')` in a type. A type-only edge counts like any
 * other: it ties the two modules together for the reader and the type checker even though it is erased. The
 * specifiers are resolved by TypeScript's own module resolution with the repository's compiler options
 * (NodeNext with the `source` condition), so `@broadcast-ops/<pkg>` and its subpaths reach the package's
 * `src/` through its `exports`, as they do for the type check and the tests. Imports that resolve outside the
 * scanned files (Node built-ins, third-party packages) are not edges.
 *
 * Cycles are the strongly connected components of the graph (Tarjan's algorithm); each is reported as one
 * closed chain through all of its modules where the edges allow, `a.ts → b.ts → a.ts`.
 */
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join, relative, resolve, sep } from 'node:path';
import ts from 'typescript';

/** Module file (absolute path) to the module files it imports, in source order, without repeats. */
export type ImportGraph = Map<string, string[]>;

const COMPILER_OPTIONS: ts.CompilerOptions = {
  module: ts.ModuleKind.NodeNext,
  moduleResolution: ts.ModuleResolutionKind.NodeNext,
  customConditions: ['source'],
  allowImportingTsExtensions: true,
  resolveJsonModule: true,
};

/**
 * Every `.ts` file (declaration files left out) under `dir`, skipping `node_modules` and the files and folders
 * whose name `skip` matches.
 */
export function tsFilesUnder(dir: string, skip?: RegExp): string[] {
  const out: string[] = [];
  const walk = (d: string): void => {
    let names: string[];
    try {
      names = readdirSync(d);
    } catch {
      return;
    }
    for (const name of names.sort()) {
      if (name === 'node_modules' || skip?.test(name)) continue;
      const path = join(d, name);
      if (statSync(path).isDirectory()) walk(path);
      else if (name.endsWith('.ts') && !name.endsWith('.d.ts')) out.push(path);
    }
  };
  walk(resolve(dir));
  return out;
}

/** The module specifiers a source text names, in order (static, type-only, re-exports and dynamic imports). */
export function specifiersOf(text: string): string[] {
  return ts.preProcessFile(text, true, true).importedFiles.map((f) => f.fileName);
}

/** The import graph of `files`: only edges between files of the set. */
export function importGraph(files: readonly string[]): ImportGraph {
  const set = new Set(files.map((f) => resolve(f)));
  const host = ts.sys;
  const cache = ts.createModuleResolutionCache(process.cwd(), (f) => f, COMPILER_OPTIONS);
  const graph: ImportGraph = new Map();
  for (const file of set) {
    const targets = new Set<string>();
    for (const spec of specifiersOf(readFileSync(file, 'utf8'))) {
      // Only relative paths and the workspace's packages can reach a scanned file: no need to resolve the rest.
      if (!spec.startsWith('.') && !spec.startsWith('@broadcast-ops/')) continue;
      const resolved = ts.resolveModuleName(
        spec,
        file,
        COMPILER_OPTIONS,
        host,
        cache,
        undefined,
        ts.ModuleKind.ESNext,
      ).resolvedModule?.resolvedFileName;
      if (resolved === undefined) continue;
      const target = resolve(resolved);
      if (set.has(target) && target !== file) targets.add(target);
    }
    graph.set(file, [...targets]);
  }
  return graph;
}

/** Strongly connected components with more than one module (Tarjan), each sorted, listed in a stable order. */
export function stronglyConnected(graph: ImportGraph): string[][] {
  let counter = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const out: string[][] = [];
  // Iterative, so a long import chain cannot overflow the call stack.
  for (const start of [...graph.keys()].sort()) {
    if (index.has(start)) continue;
    const work: { node: string; next: number }[] = [{ node: start, next: 0 }];
    index.set(start, counter);
    low.set(start, counter);
    counter += 1;
    stack.push(start);
    onStack.add(start);
    while (work.length > 0) {
      const frame = work[work.length - 1];
      if (frame === undefined) break;
      const edges = graph.get(frame.node) ?? [];
      const to = edges[frame.next];
      if (to !== undefined) {
        frame.next += 1;
        if (!index.has(to)) {
          index.set(to, counter);
          low.set(to, counter);
          counter += 1;
          stack.push(to);
          onStack.add(to);
          work.push({ node: to, next: 0 });
        } else if (onStack.has(to)) {
          low.set(frame.node, Math.min(low.get(frame.node) ?? 0, index.get(to) ?? 0));
        }
        continue;
      }
      work.pop();
      const parent = work[work.length - 1];
      if (parent !== undefined) {
        low.set(parent.node, Math.min(low.get(parent.node) ?? 0, low.get(frame.node) ?? 0));
      }
      if (low.get(frame.node) === index.get(frame.node)) {
        const component: string[] = [];
        for (;;) {
          const n = stack.pop();
          if (n === undefined) break;
          onStack.delete(n);
          component.push(n);
          if (n === frame.node) break;
        }
        if (component.length > 1) out.push(component.sort());
      }
    }
  }
  return out.sort((a, b) => (a[0] ?? '').localeCompare(b[0] ?? ''));
}

/**
 * The shortest closed chain from `start` back to itself through the component's modules (breadth-first), so a
 * two-module cycle reads `a → b → a`.
 */
export function cycleThrough(graph: ImportGraph, members: ReadonlySet<string>, start: string): string[] {
  const previous = new Map<string, string>();
  const queue = [start];
  for (let i = 0; i < queue.length; i += 1) {
    const node = queue[i] ?? start;
    for (const to of graph.get(node) ?? []) {
      if (!members.has(to)) continue;
      if (to === start) {
        const chain = [node];
        while (chain[0] !== start) chain.unshift(previous.get(chain[0] ?? start) ?? start);
        return [...chain, start];
      }
      if (!previous.has(to)) {
        previous.set(to, node);
        queue.push(to);
      }
    }
  }
  return [start];
}

/**
 * Every cycle as a readable chain, paths relative to `root`; empty when there is none. A component of the graph
 * can hold more cycles than can be listed (their number grows exponentially), so each module of a component
 * gets its shortest cycle, and the same cycle found from two of its modules is listed once.
 */
export function describeCycles(graph: ImportGraph, root: string): string[] {
  const rel = (f: string): string => relative(root, f).split(sep).join('/');
  const out: string[] = [];
  for (const component of stronglyConnected(graph)) {
    const members = new Set(component);
    const seen = new Set<string>();
    for (const start of component) {
      const chain = cycleThrough(graph, members, start);
      // The same cycle from another start is a rotation: key it by its modules from the smallest one on.
      const ring = chain.slice(0, -1);
      const first = ring.indexOf([...ring].sort()[0] ?? start);
      const rotated = [...ring.slice(first), ...ring.slice(0, first)];
      const key = rotated.join('\n');
      if (seen.has(key)) continue;
      seen.add(key);
      out.push([...rotated, rotated[0] ?? start].map(rel).join(' → '));
    }
  }
  return out;
}
