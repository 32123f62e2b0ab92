export { createStatusServer, type StatusServer } from './status-server.js';
