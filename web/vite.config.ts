/// <reference types="vitest/config" />
import react from '@vitejs/plugin-react';
import { defineConfig } from 'vite';

// The token service runs on 127.0.0.1:8080 by default (LEXVOZ_WEB_PORT); `vite dev` forwards /api to it so
// the page keeps calling its own origin, exactly as when the service serves the built page.
const apiTarget = process.env.LEXVOZ_API_URL ?? 'http://127.0.0.1:8080';

export default defineConfig({
  plugins: [react()],
  server: {
    host: '127.0.0.1',
    port: 5173,
    strictPort: true,
    proxy: { '/api': { target: apiTarget, changeOrigin: false } },
  },
  preview: { host: '127.0.0.1', port: 4173 },
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    sourcemap: false,
    // Keep every script an external file: the service's Content-Security-Policy allows only 'self'.
    assetsInlineLimit: 0,
    // livekit-client alone is most of the bundle; one file is fine for a page served from loopback.
    chunkSizeWarningLimit: 1200,
  },
  test: {
    environment: 'jsdom',
    include: ['src/**/*.test.{ts,tsx}'],
    watch: false,
  },
});
