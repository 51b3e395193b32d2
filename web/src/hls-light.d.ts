// hls.js's light build has the same API as the full one, which carries
// the types.
declare module 'hls.js/light' {
  export { default } from 'hls.js';
}
