// undici's own files, which data-plane/src/proxy/undici.ts imports and types as the public types of what they export.
declare module 'undici/lib/*' {
  const exported: unknown;
  export default exported;
}
