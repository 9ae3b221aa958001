// The tutorial's Node front-end: adds two numbers on the calculator host, then counts to 3 with progress.
//
//     node frontend.mjs tcp://127.0.0.1:5555
import { connect } from 'zerobridge';

const peer = await connect(process.argv[2], { name: 'node-frontend' });
try {
  console.log('2 + 3 =', await peer.call('add', { a: 2, b: 3 }));
  const call = peer.stream('countTo', { n: 3 });
  for await (const progress of call.progress) console.log('counted', progress.i);
  console.log('done:', await call.result);
} finally {
  await peer.close();
}
