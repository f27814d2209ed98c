/**
 * The merchant portal spoken over plain HTTP (fetch, no browser): sign in, read a page's form as a
 * browser would send it (every hidden field with its value), post it. For tests of what a browser
 * can send: repeats, concurrent posts, hostile headers.
 */
export interface PortalPost {
  status: number;
  location: string | null;
  text: string;
}

export class PortalHttp {
  cookie = '';
  /** The browser's Accept-Language (the portal answers in pt-BR or en from it). */
  acceptLanguage = 'en-US,en;q=0.9';

  constructor(readonly baseUrl: string) {}

  static async signIn(baseUrl: string, clientId: string, clientSecret: string): Promise<PortalHttp> {
    const p = new PortalHttp(baseUrl);
    const res = await fetch(`${baseUrl}/portal/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', 'accept-language': p.acceptLanguage },
      body: new URLSearchParams({ client_id: clientId, client_secret: clientSecret }).toString(),
      redirect: 'manual',
    });
    const set = res.headers.get('set-cookie');
    if (res.status !== 303 || !set) throw new Error(`portal sign-in: ${res.status} ${await res.text()}`);
    p.cookie = set.split(';')[0]!;
    return p;
  }

  async get(path: string): Promise<{ status: number; text: string; location: string | null }> {
    const res = await fetch(`${this.baseUrl}${path}`, { headers: { cookie: this.cookie, 'accept-language': this.acceptLanguage }, redirect: 'manual' });
    return { status: res.status, text: await res.text(), location: res.headers.get('location') };
  }

  /** The hidden fields of the form of `page` that posts to `action`, as the browser sends them. */
  async hiddenFields(page: string, action: string): Promise<Record<string, string>> {
    const { status, text } = await this.get(page);
    if (status !== 200) throw new Error(`GET ${page}: ${status}`);
    const start = text.indexOf(`action="${action}"`);
    if (start < 0) throw new Error(`no form posting to ${action} on ${page}`);
    const form = text.slice(start, text.indexOf('</form>', start));
    const fields: Record<string, string> = {};
    for (const m of form.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)">/g)) fields[m[1]!] = m[2]!;
    return fields;
  }

  async post(path: string, fields: Record<string, string>, headers: Record<string, string> = {}, baseUrl = this.baseUrl): Promise<PortalPost> {
    const res = await fetch(`${baseUrl}${path}`, {
      method: 'POST',
      headers: { cookie: this.cookie, 'content-type': 'application/x-www-form-urlencoded', 'accept-language': this.acceptLanguage, ...headers },
      body: new URLSearchParams(fields).toString(),
      redirect: 'manual',
    });
    return { status: res.status, location: res.headers.get('location'), text: await res.text() };
  }

  /** The one-time message shown on the page a post redirected to. */
  async flash(location: string): Promise<string> {
    const { text } = await this.get(location);
    const m = /<div class="flash (?:ok|error)" role="(?:alert|status)">([^<]*)<\/div>/.exec(text);
    return m ? m[1]! : '';
  }
}
