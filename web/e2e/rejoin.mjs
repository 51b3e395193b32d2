// rejoin.mjs drives one browser member for the Go test
// TestBrowserRejoinsAfterKill9 (internal/node): it joins through a join
// link on one node, says "joined <member>", then waits for the page to
// move by itself to the node whose URL it was given (the web app rejoins
// there when its node dies: move.ts rejoinTarget) and says "rejoined
// <member> <url>". The Go test kills the first node in between and checks
// the media; closing stdin ends the browser.
//
//   node e2e/rejoin.mjs <join link> <name> <url of the node to rejoin on>
import { launch, joinThroughUI, waitFor } from './harness.mjs';

const [link, name, to] = process.argv.slice(2);
const browser = await launch();
const end = async (code) => {
  await browser.close().catch(() => {});
  process.exit(code);
};
process.stdin.on('end', () => end(0));
process.stdin.resume();
try {
  const page = await joinThroughUI(await browser.newContext(), link, name);
  // The page may already be moving (a node that places members sends it
  // on at once): read the member from whichever page is there, again
  // until one answers.
  const member = () => page.evaluate(() => window.convene?.member ?? '').catch(() => '');
  let joined = '';
  await waitFor(async () => (joined = await member()), 30000, 'the member to be known');
  console.log('joined ' + joined);
  let rejoined = '';
  await waitFor(
    async () => page.url().startsWith(to) && (rejoined = await member()),
    120000,
    'the page to rejoin on ' + to,
  );
  console.log('rejoined ' + rejoined + ' ' + page.url());
} catch (e) {
  console.log('error ' + String(e).replaceAll('\n', ' '));
  await end(1);
}
