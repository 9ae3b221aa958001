// Jobs (SPEC 7.16): the payloads of the reserved actions `$job.start`, `$job.attach`, `$job.cancel` and `$job.list`
// built from what a caller gives (checked, TypeError on anything the host would refuse), and the job records the host
// answers with, checked against schema/job.schema.json and turned into JavaScript's camelCase. The peer's
// startJob/attachJob/cancelJob/listJobs are these around an ordinary call or stream.

import { BridgeError } from './errors.js';
import { checkName } from './link.js';
import { has, isName, isNonNegativeInteger, isObject, isPositiveInteger } from './wire.js';

export const JOB_STATES = Object.freeze(['running', 'suspended', 'succeeded', 'failed', 'cancelled', 'interrupted']);
// Not final: `suspended` (since 1.6) resumes from its checkpoint at the host's next start.
const UNFINISHED = new Set(['running', 'suspended']);
const FINAL_WITH_ERROR = new Set(['failed', 'cancelled', 'interrupted']);
const LIST_LIMIT_MAX = 1000;
export const DEFAULT_LIST_LIMIT = 100;

/** `{job}` or `{action, key}` (exactly one of the two forms), as the payload of `$job.attach` and `$job.cancel`. */
function selectorPayload(selector, method) {
  if (!isObject(selector)) throw new TypeError(`${method}() takes { job } or { action, key }, not ${String(selector)}`);
  const byId = selector.job !== undefined;
  const byKey = selector.action !== undefined || selector.key !== undefined;
  if (byId === byKey) {
    throw new TypeError(`${method}() takes { job } or { action, key }: ${byId ? 'both were given' : 'neither was given'}`);
  }
  if (byId) {
    checkName(selector.job, `${method}()'s job`);
    return { job: selector.job };
  }
  checkName(selector.action, `${method}()'s action`);
  checkName(selector.key, `${method}()'s key`);
  return { action: selector.action, key: selector.key };
}

/** The payload of `$job.start`: the job's action, its payload and, when given, its idempotency key. */
export function startPayload(action, payload, key) {
  checkName(action, 'startJob()\'s action');
  if (key !== undefined) checkName(key, 'startJob()\'s key');
  return { action, payload: payload ?? null, key };
}

/** The payload of `$job.attach`: the selector and `after_seq`, the last seq the caller has (0: from the start). */
export function attachPayload(selector, afterSeq = 0) {
  const payload = selectorPayload(selector, 'attachJob');
  if (!Number.isSafeInteger(afterSeq) || afterSeq < 0) {
    throw new TypeError(`attachJob()'s afterSeq must be an integer >= 0 (the seq of the last progress already seen), not ${String(afterSeq)}`);
  }
  return { ...payload, after_seq: afterSeq };
}

export function cancelPayload(selector) {
  return selectorPayload(selector, 'cancelJob');
}

/** The payload of `$job.list` from `{action?, state?, job?, limit?}`. */
export function listPayload(filter = {}) {
  if (!isObject(filter)) throw new TypeError(`listJobs() takes { action?, state?, job?, limit? }, not ${String(filter)}`);
  const { action, state, job, limit = DEFAULT_LIST_LIMIT } = filter;
  if (action !== undefined) checkName(action, 'listJobs()\'s action');
  if (job !== undefined) checkName(job, 'listJobs()\'s job');
  if (state !== undefined && !JOB_STATES.includes(state)) {
    throw new TypeError(`listJobs()'s state must be one of ${JOB_STATES.join(', ')}, not ${JSON.stringify(state) ?? String(state)}`);
  }
  if (!Number.isInteger(limit) || limit < 1 || limit > LIST_LIMIT_MAX) {
    throw new TypeError(`listJobs()'s limit must be an integer in 1..${LIST_LIMIT_MAX}, not ${String(limit)}`);
  }
  return { action, state, job, limit };
}

/** Why `value` is not a job record (schema/job.schema.json), or null. */
export function recordProblem(value) {
  if (!isObject(value)) return 'it is not an object';
  if (!isName(value.job)) return 'job must be a string of 1..128 characters';
  if (!isName(value.action)) return 'action must be a string of 1..128 characters';
  if (has(value, 'key') && !isName(value.key)) return 'key must be a string of 1..128 characters';
  if (!JOB_STATES.includes(value.state)) return `state must be one of ${JOB_STATES.join(', ')}`;
  if (!isNonNegativeInteger(value.last_seq)) return 'last_seq must be an integer >= 0';
  if (!isPositiveInteger(value.runs)) return 'runs must be an integer >= 1';
  if (!isNonNegativeInteger(value.created_ms)) return 'created_ms must be an integer >= 0';
  if (has(value, 'finished_ms') && !isNonNegativeInteger(value.finished_ms)) return 'finished_ms must be an integer >= 0';
  if (has(value, 'error')) {
    const { error } = value;
    if (!isObject(error) || !isName(error.code) || typeof error.message !== 'string') return 'error must be {code, message, data?}';
  }
  if (has(value, 'created') && typeof value.created !== 'boolean') return 'created must be a boolean';
  // What each state carries: an error and an end in failed, cancelled and interrupted; an end without an error once
  // succeeded; neither while running or suspended.
  const final = !UNFINISHED.has(value.state);
  if (final !== has(value, 'finished_ms')) return `a ${value.state} job ${final ? 'needs' : 'has no'} finished_ms`;
  if (FINAL_WITH_ERROR.has(value.state) !== has(value, 'error')) return `a ${value.state} job ${FINAL_WITH_ERROR.has(value.state) ? 'needs' : 'has no'} error`;
  return null;
}

/**
 * A job record from the wire as JavaScript reads it: `last_seq` -> `lastSeq`, `created_ms` -> `createdMs`,
 * `finished_ms` -> `finishedMs`; the other fields keep their names, optional ones are left out when absent, unknown ones
 * are dropped. A value that is not a record is `bad_message`, naming the reserved action that answered it.
 */
export function recordFrom(value, source) {
  const problem = recordProblem(value);
  if (problem !== null) throw new BridgeError('bad_message', `the host's ${source} result is not a job record: ${problem}`);
  const record = {
    job: value.job, action: value.action, state: value.state, lastSeq: value.last_seq, runs: value.runs, createdMs: value.created_ms,
  };
  if (has(value, 'key')) record.key = value.key;
  if (has(value, 'finished_ms')) record.finishedMs = value.finished_ms;
  if (has(value, 'error')) {
    const { code, message, data } = value.error;
    record.error = data === undefined ? { code, message } : { code, message, data };
  }
  if (has(value, 'created')) record.created = value.created;
  return record;
}

/** The records of a `$job.list` result, `{"jobs": [record, ...]}`. */
export function recordsFrom(value) {
  if (!isObject(value) || !Array.isArray(value.jobs)) {
    throw new BridgeError('bad_message', 'the host\'s $job.list result is not {"jobs": [...]}');
  }
  return value.jobs.map((record, i) => recordFrom(record, `$job.list (jobs[${i}])`));
}
