// Every entry point of the package (package.json `exports`) has type declarations: each value it exports is declared
// in its .d.ts, and a TypeScript program using both entry points type-checks with tsc --strict (Debian's
// node-typescript, which `make deps-system` installs) against the package as an app resolves it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, symlink, mkdir, writeFile, copyFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify } from 'node:util';

const packageRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const manifest = JSON.parse(await readFile(path.join(packageRoot, 'package.json'), 'utf8'));
const entryPoints = Object.entries(manifest.exports).filter(([name]) => name !== './package.json');

// The names a .d.ts declares as values: `export declare const|function|class`, `export const|function|class`, and
// values re-exported from another declaration file (`export { A, B as C } from './index.js'`, not `export type`).
function declaredValues(text) {
  const declared = [...text.matchAll(/^export (?:declare )?(?:const|function|class) ([A-Za-z_$][\w$]*)/gm)].map((m) => m[1]);
  const reexported = [...text.matchAll(/^export \{([^}]*)\} from /gm)]
    .flatMap((m) => m[1].split(',').map((name) => name.trim().split(/\s+as\s+/).pop()).filter(Boolean));
  return new Set([...declared, ...reexported]);
}

for (const [name, target] of entryPoints) {
  test(`${name}: every export is declared in its types`, async () => {
    assert.equal(typeof target, 'object', `${name} names its types (exports["${name}"].types)`);
    const declarations = await readFile(path.join(packageRoot, target.types), 'utf8');
    const declared = declaredValues(declarations);
    const module = await import(pathToFileURL(path.join(packageRoot, target.default)).href);
    const undeclared = Object.keys(module).filter((exported) => !declared.has(exported));
    assert.deepEqual(undeclared, [], `${target.default} exports these without a declaration in ${target.types}`);
    const stale = [...declared].filter((value) => !(value in module));
    assert.deepEqual(stale, [], `${target.types} declares these but ${target.default} does not export them`);
  });
}

test('a TypeScript program using every entry point type-checks (tsc --strict)', async () => {
  const scratch = await mkdtemp(path.join(tmpdir(), 'zerobridge-types-'));
  try {
    await mkdir(path.join(scratch, 'node_modules'));
    await symlink(packageRoot, path.join(scratch, 'node_modules', 'zerobridge'), 'dir');
    await copyFile(path.join(packageRoot, 'test-helpers', 'types-consumer.ts'), path.join(scratch, 'consumer.ts'));
    await writeFile(path.join(scratch, 'package.json'), JSON.stringify({ type: 'module', private: true }));
    // No @types/node (not in Debian): the declarations must stand on the ES and DOM libraries alone.
    await writeFile(path.join(scratch, 'tsconfig.json'), JSON.stringify({
      compilerOptions: {
        strict: true, noEmit: true, module: 'node16', moduleResolution: 'node16', target: 'es2022',
        lib: ['es2022', 'dom'], types: [], skipLibCheck: false, preserveSymlinks: true,
      },
      files: ['consumer.ts'],
    }));
    let result;
    try {
      result = await promisify(execFile)('tsc', ['-p', scratch], { cwd: scratch, timeout: 120_000 });
    } catch (error) {
      if (error.code === 'ENOENT') assert.fail('tsc is not installed: `make deps-system` installs Debian\'s node-typescript');
      assert.fail(`tsc found type errors:\n${error.stdout}${error.stderr}`);
    }
    assert.equal(result.stdout + result.stderr, '');
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
});
