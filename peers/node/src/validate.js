// The `validate` option (SPEC 7.14): a payload checked against the JSON Schema the callee's catalogue gives for it
// (SPEC 7.8) before it is sent. Exactly SPEC 7.8's keyword subset is understood: type (a name or a list),
// properties, required, additionalProperties, items, prefixItems, enum, const, anyOf, minimum, maximum, minLength,
// maxLength, minItems, maxItems, uniqueItems; format, title, description and $comment are annotations (not checked,
// as in draft 2020-12). Keywords outside the subset are ignored: every keyword of a schema constrains on its own,
// so ignoring one never refuses a value the schema accepts (it only lets through some that it would refuse), with
// one exception handled here: additionalProperties is not applied beside patternProperties, whose members it
// would otherwise count as additional.
//
// Bytes: a schema {"type": "string", "contentEncoding": "base64"} is bytes; a Uint8Array/Buffer (sent as an
// attachment) matches it, as does base64 text. Bytes match no other string schema.
//
// Values are those values.js accepts: null, booleans, finite numbers, BigInts (integers), strings, arrays, plain
// objects (a member whose value is undefined is absent) and bytes.

import { bytesEqual } from './bytes.js';

const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/;
const TYPE_NAMES = new Set(['null', 'boolean', 'object', 'array', 'number', 'string', 'integer']);

const member = (path, name) => (IDENTIFIER.test(name) ? `${path}.${name}` : `${path}[${JSON.stringify(name)}]`);
const isBytes = (value) => value instanceof Uint8Array;
const isPlainObject = (value) => typeof value === 'object' && value !== null && !Array.isArray(value) && !isBytes(value);
const isBytesSchema = (schema) => schema.contentEncoding === 'base64';
const present = (object, name) => Object.hasOwn(object, name) && object[name] !== undefined;

/** The JSON type of a value, as schemas name them; bytes are 'bytes'. */
function typeOf(value) {
  if (value === null) return 'null';
  switch (typeof value) {
    case 'boolean': return 'boolean';
    case 'number': return Number.isInteger(value) ? 'integer' : 'number';
    case 'bigint': return 'integer';
    case 'string': return 'string';
    default: return Array.isArray(value) ? 'array' : isBytes(value) ? 'bytes' : 'object';
  }
}

/** A short rendering of a value for a message. */
function show(value) {
  if (isBytes(value)) return `${value.length} bytes`;
  if (typeof value === 'bigint') return `${value}`;
  let text;
  try {
    text = JSON.stringify(value, (_, v) => (typeof v === 'bigint' ? Number(v) : isBytes(v) ? `<${v.length} bytes>` : v));
  } catch {
    text = String(value);
  }
  return text.length > 60 ? `${text.slice(0, 57)}...` : text;
}

/**
 * What was there, as the Python peer and the Swift host say it (docs/errors.md): `5`, `true`, `null`,
 * `the string "2"`, `an array of 2 items`, `an object`, `3 bytes`.
 */
function describeValue(value) {
  if (typeof value === 'string') return `the string ${JSON.stringify(value.length <= 40 ? value : `${value.slice(0, 37)}...`)}`;
  if (Array.isArray(value)) return `an array of ${value.length} items`;
  if (value !== null && typeof value === 'object' && !isBytes(value)) return 'an object';
  return show(value);
}

function describeType(type) {
  return type === 'integer' ? 'an integer' : type === 'array' ? 'an array' : type === 'object' ? 'an object' : type === 'null' ? 'null' : `a ${type}`;
}

/** JSON equality (numbers by value, 1 and 1n alike; members in any order; bytes by content). */
export function jsonEqual(a, b) {
  if (a === b) return true;
  const ta = typeof a;
  const tb = typeof b;
  if ((ta === 'number' || ta === 'bigint') && (tb === 'number' || tb === 'bigint')) return a == b; // eslint-disable-line eqeqeq
  if (a === null || b === null || ta !== 'object' || tb !== 'object') return false;
  if (isBytes(a) || isBytes(b)) return isBytes(a) && isBytes(b) && bytesEqual(a, b);
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a)) return a.length === b.length && a.every((item, i) => jsonEqual(item, b[i]));
  const names = Object.keys(a).filter((name) => a[name] !== undefined);
  if (names.length !== Object.keys(b).filter((name) => b[name] !== undefined).length) return false;
  return names.every((name) => present(b, name) && jsonEqual(a[name], b[name]));
}

function codePoints(text) {
  let count = 0;
  for (let i = 0; i < text.length; i += 1) {
    const unit = text.charCodeAt(i);
    if (unit < 0xd800 || unit > 0xdbff) count += 1;
  }
  return count;
}

/** A mismatch: where (`payload.items[3]`), what was expected there, and both as `message`. */
const fail = (path, reason) => ({ path, reason, message: `${path}: ${reason}` });

/**
 * The first reason `value` (at `path`) does not match `schema`, as `{path, reason, message}` (`message` is
 * `path: what was expected, got what`), or null when it matches.
 */
export function schemaProblem(schema, value, path = 'payload') {
  if (schema === true || schema === undefined) return null;
  if (schema === false) return fail(path, `no value is allowed here (the schema is false), got ${show(value)}`);
  if (typeof schema !== 'object' || schema === null || Array.isArray(schema)) return null; // not a schema: any value
  const type = typeOf(value);
  const bytesSchema = isBytesSchema(schema);

  if (schema.type !== undefined) {
    const types = (Array.isArray(schema.type) ? schema.type : [schema.type]).filter((name) => TYPE_NAMES.has(name));
    const accepted = types.length === 0 || (type === 'bytes'
      ? bytesSchema && types.includes('string')
      : types.includes(type) || (type === 'integer' && types.includes('number')));
    if (!accepted) {
      const wanted = types.map((name) => (name === 'string' && bytesSchema ? 'bytes (a Uint8Array/Buffer, or base64 text)' : describeType(name))).join(' or ');
      return fail(path, `expected ${wanted}, got ${describeValue(value)}`);
    }
  } else if (type === 'bytes' && schema.contentEncoding !== undefined && !bytesSchema) {
    return fail(path, `expected text in ${schema.contentEncoding}, got ${show(value)}`);
  }

  if (schema.const !== undefined && !jsonEqual(schema.const, value)) return fail(path, `expected ${show(schema.const)}, got ${show(value)}`);
  if (Array.isArray(schema.enum) && !schema.enum.some((option) => jsonEqual(option, value))) {
    return fail(path, `expected one of ${show(schema.enum)}, got ${show(value)}`);
  }
  if (Array.isArray(schema.anyOf) && schema.anyOf.length > 0) {
    const problems = [];
    for (const alternative of schema.anyOf) {
      const problem = schemaProblem(alternative, value, path);
      if (problem === null) {
        problems.length = 0;
        break;
      }
      problems.push(problem.message);
    }
    if (problems.length > 0) return fail(path, `matches none of the ${problems.length} schemas of anyOf (${problems.join('; ')})`);
  }

  if (type === 'integer' || type === 'number') {
    if (typeof schema.minimum === 'number' && value < schema.minimum) return fail(path, `expected at least ${schema.minimum}, got ${show(value)}`);
    if (typeof schema.maximum === 'number' && value > schema.maximum) return fail(path, `expected at most ${schema.maximum}, got ${show(value)}`);
  } else if (type === 'string') {
    if (bytesSchema && !BASE64.test(value)) return fail(path, `expected bytes (a Uint8Array/Buffer, or base64 text), got the string ${show(value)}, which is not base64`);
    if (!bytesSchema && (typeof schema.minLength === 'number' || typeof schema.maxLength === 'number')) {
      const length = codePoints(value);
      if (typeof schema.minLength === 'number' && length < schema.minLength) {
        return fail(path, `expected a string of at least ${schema.minLength} characters, got ${length}: ${show(value)}`);
      }
      if (typeof schema.maxLength === 'number' && length > schema.maxLength) {
        return fail(path, `expected a string of at most ${schema.maxLength} characters, got ${length}`);
      }
    }
  } else if (type === 'array') {
    if (typeof schema.minItems === 'number' && value.length < schema.minItems) return fail(path, `expected at least ${schema.minItems} items, got ${value.length}`);
    if (typeof schema.maxItems === 'number' && value.length > schema.maxItems) return fail(path, `expected at most ${schema.maxItems} items, got ${value.length}`);
    const prefix = Array.isArray(schema.prefixItems) ? schema.prefixItems : [];
    for (let i = 0; i < value.length; i += 1) {
      const itemSchema = i < prefix.length ? prefix[i] : schema.items;
      if (itemSchema === false) return fail(`${path}[${i}]`, `no item is allowed here (${prefix.length === 0 ? 'items' : `${prefix.length} prefixItems, and items`} is false)`);
      const problem = schemaProblem(itemSchema, value[i], `${path}[${i}]`);
      if (problem !== null) return problem;
    }
    if (schema.uniqueItems === true) {
      for (let i = 1; i < value.length; i += 1) {
        for (let j = 0; j < i; j += 1) {
          if (jsonEqual(value[i], value[j])) return fail(path, `expected unique items, but [${j}] and [${i}] are equal (${show(value[i])})`);
        }
      }
    }
  } else if (type === 'object') {
    if (Array.isArray(schema.required)) {
      for (const name of schema.required) {
        if (typeof name === 'string' && !present(value, name)) return fail(path, `missing the required member ${JSON.stringify(name)}`);
      }
    }
    const properties = isPlainObject(schema.properties) ? schema.properties : {};
    const additional = schema.patternProperties === undefined ? schema.additionalProperties : undefined;
    for (const name of Object.keys(value)) {
      if (value[name] === undefined) continue;
      const known = Object.hasOwn(properties, name);
      if (!known && additional === false) {
        const allowed = Object.keys(properties);
        return fail(member(path, name), `not allowed (additionalProperties is false${allowed.length > 0 ? `; the members are ${allowed.map((n) => JSON.stringify(n)).join(', ')}` : ''})`);
      }
      const problem = schemaProblem(known ? properties[name] : additional, value[name], member(path, name));
      if (problem !== null) return problem;
    }
  }
  return null;
}
