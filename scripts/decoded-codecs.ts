/**
 * Which codecs do not return `Decoded`, for scripts/test/app/decoded-codecs.test.ts (docs/ARCHITECTURE.md "Codecs
 * return Decoded").
 *
 * A codec here is a function a `protocol/` module exports under a name starting with `decode`, `parse` or
 * `read` (declared with `function` or as a `const` holding a function). Each of its call signatures must return
 * core's `Decoded<T, E>`: the type checker's view of the return type, written directly or through a local
 * alias, must be a union of exactly `{ ok: true; value: T }` and `{ ok: false; error: E }`, with an `E`
 * carrying at least `code` and `message` (core's `DecodeError`). The program is built with the repository's
 * tsconfig.json compiler options, so `@broadcast-ops/core` resolves as it does for the type check.
 */
import { dirname, relative } from 'node:path';
import ts from 'typescript';

export const CODEC_NAME = /^(decode|parse|read)(?![a-z])/;

export interface CodecFinding {
  /** Path relative to `root`. */
  file: string;
  name: string;
  /** The return type as the checker prints it. */
  returns: string;
  /** Whether that return type is `Decoded`. */
  decoded: boolean;
}

/** The compiler options of `tsconfigPath` (the repository's tsconfig.json). */
export function compilerOptionsOf(tsconfigPath: string): ts.CompilerOptions {
  const parsed = ts.getParsedCommandLineOfConfigFile(tsconfigPath, undefined, {
    ...ts.sys,
    onUnRecoverableConfigFileDiagnostic: (d) => {
      throw new Error(ts.flattenDiagnosticMessageText(d.messageText, '\n'));
    },
  });
  if (!parsed) throw new Error(`cannot read ${tsconfigPath}`);
  return parsed.options;
}

function propertyType(checker: ts.TypeChecker, type: ts.Type, name: string): ts.Type | undefined {
  const prop = type.getProperty(name);
  return prop ? checker.getNonNullableType(checker.getTypeOfSymbol(prop)) : undefined;
}

function propertyNames(type: ts.Type): string[] {
  return type
    .getProperties()
    .map((p) => p.name)
    .sort();
}

/** True when `type` is `{ ok: true; value: T } | { ok: false; error: E }` with `E` a `DecodeError`. */
export function isDecoded(checker: ts.TypeChecker, type: ts.Type): boolean {
  if (!type.isUnion() || type.types.length !== 2) return false;
  let good = 0;
  let bad = 0;
  for (const arm of type.types) {
    const ok = propertyType(checker, arm, 'ok');
    if (!ok || !(ok.flags & ts.TypeFlags.BooleanLiteral)) return false;
    const names = propertyNames(arm).join(',');
    if (checker.typeToString(ok) === 'true' && names === 'ok,value') good++;
    else if (checker.typeToString(ok) === 'false' && names === 'error,ok') {
      const error = propertyType(checker, arm, 'error');
      const code = error && propertyType(checker, error, 'code');
      const message = error && propertyType(checker, error, 'message');
      if (!code || !message) return false;
      if (!(checker.getBaseTypeOfLiteralType(code).flags & ts.TypeFlags.String)) return false;
      if (!(message.flags & ts.TypeFlags.String)) return false;
      bad++;
    } else return false;
  }
  return good === 1 && bad === 1;
}

/**
 * Every call signature of every exported `decode*`/`parse*`/`read*` function of `files` (absolute paths),
 * with its return type and whether that is `Decoded`. Paths in the findings are relative to `root`.
 */
export function auditCodecs(
  files: readonly string[],
  options: ts.CompilerOptions,
  root: string = dirname(files[0] ?? '.'),
): CodecFinding[] {
  const program = ts.createProgram({ rootNames: files, options: { ...options, noEmit: true } });
  const checker = program.getTypeChecker();
  const findings: CodecFinding[] = [];
  for (const file of files) {
    const source = program.getSourceFile(file);
    if (!source) throw new Error(`not in the program: ${file}`);
    const moduleSymbol = checker.getSymbolAtLocation(source);
    if (!moduleSymbol) continue;
    for (const exported of checker.getExportsOfModule(moduleSymbol)) {
      if (!CODEC_NAME.test(exported.name)) continue;
      const symbol = exported.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(exported) : exported;
      if (!(symbol.flags & (ts.SymbolFlags.Function | ts.SymbolFlags.Variable))) continue;
      const type = checker.getTypeOfSymbol(symbol);
      for (const signature of type.getCallSignatures()) {
        const returns = checker.getReturnTypeOfSignature(signature);
        findings.push({
          file: relative(root, file),
          name: exported.name,
          returns: checker.typeToString(returns, undefined, ts.TypeFormatFlags.NoTruncation),
          decoded: isDecoded(checker, returns),
        });
      }
    }
  }
  return findings;
}
