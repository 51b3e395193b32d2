import { defineConfig } from 'vite';

// The app is built into the Go package that embeds it; it loads nothing
// from outside the node.
export default defineConfig({
  esbuild: { jsx: 'automatic', jsxImportSource: 'preact' },
  build: {
    outDir: '../internal/webui/dist',
    emptyOutDir: true,
    assetsInlineLimit: 0,
    sourcemap: false,
  },
  test: {
    include: ['test/**/*.test.ts'],
    environment: 'node',
  },
});
