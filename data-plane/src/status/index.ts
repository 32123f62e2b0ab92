export { createStatusServer, type StatusServer, type StatusSource } from './status-server.js';
