// Writes the CustomResourceDefinitions generated from the definition schemas (control-plane/src/store/kubernetes/crds.ts)
// to deploy/crds/ and helm/gatehouse/crds/. Run after changing a definition schema: `npm run generate`
// (crds.test.ts fails while the committed files differ from what the schemas generate).
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const { RESOURCE_KINDS, crdFileName, crdYaml } = await import(join(root, 'control-plane/dist/store/kubernetes/crds.js'));

for (const dir of ['deploy/crds', 'helm/gatehouse/crds']) {
  mkdirSync(join(root, dir), { recursive: true });
  for (const resource of RESOURCE_KINDS) {
    const path = join(root, dir, crdFileName(resource));
    writeFileSync(path, crdYaml(resource));
    console.log(`wrote ${join(dir, crdFileName(resource))}`);
  }
}
