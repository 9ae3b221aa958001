// The WebKit compatibility layer (issue 24, SPEC decision 47): a classic script the host injects at the start of
// every page it serves, after `globalThis.__zerobridge = {endpoint, key, info}`, as a WKUserScript at document start
// would be. It gives the page what a WKWebView gives it:
//
//   const reply = await window.webkit.messageHandlers.add.postMessage({ a: 1, b: 2 });   // the host's action `add`
//   window.webkit.messageHandlers.clicked.postMessage({ x: 3 });                         // an event for the host
//
// postMessage returns a Promise, as WebKit's does (Source/WebCore/page/UserMessageHandler.idl: `Promise<any>
// postMessage(any message)`). A name the host serves as an action is a handler with a reply
// (WKScriptMessageHandlerWithReply): the promise resolves with the result, or rejects with an Error whose message is
// the error's message (WKScriptMessageHandlerWithReply.h). Any other name is a handler without a reply
// (WKScriptMessageHandler): the body goes to the host as an event, and the promise resolves with undefined.
// Posts made before the connection is up wait for it (at most MAX_WAITING of them).
//
// The host may run scripts in the page (`$evaluate`: its evaluateJavaScript / callAsyncJavaScript) only when the
// page opts in with <meta name="zerobridge-evaluate" content="on">. The connected peer (the browser peer's API, for
// `on`, `subscribe`, jobs ...) is `await globalThis.__zerobridge.peer`. README.md says which WebKit behaviours differ.
(() => {
  'use strict';

  const configuration = globalThis.__zerobridge;
  // A real WKWebView already has window.webkit.messageHandlers; and a page not served by a ZeroBridge host has no
  // configuration. Either way there is nothing to do.
  if (globalThis.webkit?.messageHandlers !== undefined || typeof configuration !== 'object' || configuration === null) return;

  const MAX_WAITING = 1000;
  const here = document.currentScript?.src ?? `${location.origin}/_zerobridge/webkit.js`;
  const waiting = [];
  let peer = null;
  let failure = null;

  /** What WebKit's reply handler rejects with: an Error with the error's message (its code is kept, as `code`). */
  const rejection = (error) => Object.assign(new Error(String(error?.message ?? error)), error?.code === undefined ? {} : { code: error.code });

  function deliver(name, body) {
    if (peer.hostActions.includes(name)) return peer.call(name, body).catch((error) => { throw rejection(error); });
    try {
      peer.post(name, body);
    } catch (error) {
      return Promise.reject(rejection(error));
    }
    return Promise.resolve(undefined);
  }

  function postMessage(name, body) {
    if (peer !== null) return deliver(name, body);
    if (failure !== null) return Promise.reject(rejection(failure));
    if (waiting.length >= MAX_WAITING) {
      return Promise.reject(new Error(`${MAX_WAITING} messages already wait for the connection to the host; this one is refused`));
    }
    return new Promise((resolve, reject) => waiting.push({ name, body, resolve, reject }));
  }

  const handlers = new Map();
  const handlerFor = (name) => {
    let handler = handlers.get(name);
    if (handler === undefined) {
      handler = Object.freeze({ postMessage: (body) => postMessage(name, body) });
      handlers.set(name, handler);
    }
    return handler;
  };
  // Every string name is a handler: which the host serves is known only once it has welcomed the page.
  const messageHandlers = new Proxy(Object.create(null), {
    get: (target, name) => (typeof name === 'string' && name !== 'then' ? handlerFor(name) : undefined),
    has: (target, name) => typeof name === 'string',
    set: () => false,
    defineProperty: () => false,
  });
  Object.defineProperty(globalThis, 'webkit', { value: Object.freeze({ messageHandlers }), enumerable: false, configurable: false, writable: false });

  const optedIn = () => document.querySelector('meta[name="zerobridge-evaluate"]')?.content === 'on';
  // The meta element comes after this script in the document: it is read once the document is parsed.
  const parsed = document.readyState === 'loading'
    ? new Promise((resolve) => { document.addEventListener('DOMContentLoaded', resolve, { once: true }); })
    : Promise.resolve();

  configuration.peer = parsed
    .then(() => import(new URL('browser.js', here).href))
    .then(({ Peer }) => new Peer({ evaluate: optedIn() }).connect())
    .then((connected) => {
      peer = connected;
      for (const post of waiting.splice(0)) deliver(post.name, post.body).then(post.resolve, post.reject);
      return connected;
    }, (error) => {
      failure = error;
      console.warn(`zerobridge: window.webkit.messageHandlers cannot reach the host: ${error?.message ?? error}`);
      for (const post of waiting.splice(0)) post.reject(rejection(error));
      throw error;
    });
  configuration.peer.catch(() => {}); // reported above; a page that awaits it sees the error itself
})();
