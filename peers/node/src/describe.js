// SPEC 7.8 `$describe`: the descriptions of the actions this peer serves, its catalogue, and the catalogue's hash,
// the SHA-256 of its RFC 8785 (JSON Canonicalization Scheme) form. The SHA-256 is the platform's, passed in as
// `sha256Hex(text)`: node:crypto's in Node, src/sha256.js in a page.
import { serialize } from './values.js';

/**
 * RFC 8785: the canonical JSON text of a JSON value (null, booleans, finite numbers, well-formed strings, arrays,
 * plain objects). No white space; members sorted by the UTF-16 code units of their names (what `<` on strings
 * compares); strings escaped as JSON.stringify escapes them (`"`, `\`, `\b \t \n \f \r`, other controls as
 * `\u00xx` in lowercase hex); numbers as ECMAScript writes them, which is what JSON.stringify does (-0 as 0).
 * Throws a TypeError for anything else (RFC 8785 has no form for it).
 */
export function canonicalJson(value) {
  switch (typeof value) {
    case 'string':
      if (!value.isWellFormed()) throw new TypeError('RFC 8785: a string with an unpaired surrogate has no canonical form');
      return JSON.stringify(value);
    case 'number':
      if (!Number.isFinite(value)) throw new TypeError(`RFC 8785: ${value} has no canonical form`);
      return JSON.stringify(value);
    case 'boolean':
      return value ? 'true' : 'false';
    case 'object': {
      if (value === null) return 'null';
      if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
      const names = Object.keys(value).filter((name) => value[name] !== undefined).sort();
      return `{${names.map((name) => `${canonicalJson(name)}:${canonicalJson(value[name])}`).join(',')}}`;
    }
    default:
      throw new TypeError(`RFC 8785: a ${typeof value} has no canonical form`);
  }
}

/** Lowercase hex SHA-256 of the UTF-8 bytes of `value`'s RFC 8785 form. */
export const canonicalHash = (value, sha256Hex) => sha256Hex(canonicalJson(value));

/**
 * A schema given to handle(): a JSON Schema (an object, or true/false), copied as JSON (so later changes to the
 * caller's object change nothing) after the checks every sent value gets (SPEC 7.14). Throws a TypeError naming the
 * option.
 */
function schemaOption(schema, action, part) {
  if (schema === undefined) return {};
  const where = `the ${part} schema of ${JSON.stringify(action)}`;
  if (typeof schema !== 'boolean' && (typeof schema !== 'object' || schema === null || Array.isArray(schema))) {
    throw new TypeError(`${where} must be a JSON Schema: an object (or true/false)`);
  }
  let encoded;
  try {
    encoded = serialize(schema, part, 5); // body, result, actions, a description, the schema
  } catch (error) {
    throw new TypeError(`${where} is not JSON: ${error.message}`);
  }
  if (encoded.attachments.length > 0) throw new TypeError(`${where} holds bytes; a schema is JSON text only`);
  return JSON.parse(encoded.json);
}

/**
 * The description of an action (SPEC 7.8) from handle()'s options `{doc?, payload?, result?, progress?}`: `doc` one
 * line (default ""), a schema not given is `{}` (any value), and `progress` is there only when given. Throws a
 * TypeError for options that are not that.
 */
export function describeAction(action, options) {
  if (options === undefined || options === null) return { name: action, doc: '', payload: {}, result: {} };
  if (typeof options !== 'object' || Array.isArray(options)) {
    throw new TypeError(`the options of ${JSON.stringify(action)} must be an object { doc?, payload?, result?, progress? }`);
  }
  const { doc = '' } = options;
  if (typeof doc !== 'string' || /[\n\r\u2028\u2029]/.test(doc) || !doc.isWellFormed()) {
    throw new TypeError(`the doc of ${JSON.stringify(action)} must be one line of text (no line breaks)`);
  }
  const description = {
    name: action,
    doc,
    payload: schemaOption(options.payload, action, 'payload'),
    result: schemaOption(options.result, action, 'result'),
  };
  if (options.progress !== undefined) description.progress = schemaOption(options.progress, action, 'progress');
  return description;
}

/** The catalogue of these descriptions (reserved `$` names left out): `{catalogue: hash, actions}`, sorted by name. */
export function buildCatalogue(descriptions, sha256Hex) {
  const actions = [...descriptions].filter((d) => !d.name.startsWith('$')).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  return { catalogue: canonicalHash(actions, sha256Hex), actions };
}

/** Whether a `$describe` result looks like a catalogue: `{catalogue, actions: [{name, payload, ...}, ...]}`. */
export function catalogueProblem(value) {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return 'it is not an object';
  if (typeof value.catalogue !== 'string' || !/^[0-9a-f]{64}$/.test(value.catalogue)) return 'catalogue is not 64 lowercase hex digits';
  if (!Array.isArray(value.actions)) return 'actions is not an array';
  for (const [i, description] of value.actions.entries()) {
    if (typeof description !== 'object' || description === null || typeof description.name !== 'string') return `actions[${i}] has no name`;
    for (const part of ['payload', 'result', 'progress']) {
      const schema = description[part];
      if (schema !== undefined && typeof schema !== 'boolean' && (typeof schema !== 'object' || schema === null || Array.isArray(schema))) {
        return `actions[${i}].${part} is not a schema`;
      }
    }
  }
  return null;
}
