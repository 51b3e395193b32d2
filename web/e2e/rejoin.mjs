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
  console.log('joined ' + (await page.evaluate(() => window.convene.member)));
  await waitFor(
    async () => page.url().startsWith(to) && (await page.evaluate(() => window.convene?.member ?? '').catch(() => '')),
    120000,
    'the page to rejoin on ' + to,
  );
  console.log('rejoined ' + (await page.evaluate(() => window.convene.member)) + ' ' + page.url());
} catch (e) {
  console.log('error ' + String(e).replaceAll('\n', ' '));
  await end(1);
}
