/**
 * Names of well-known participants of the instant-payment system by ISPB, used to show
 * `payer_bank_name` in statements. Unknown ISPBs resolve to null.
 */
const BANKS: Record<string, string> = {
  '00000000': 'Banco do Brasil S.A.',
  '00360305': 'Caixa Econômica Federal',
  '60746948': 'Banco Bradesco S.A.',
  '60701190': 'Itaú Unibanco S.A.',
  '90400888': 'Banco Santander (Brasil) S.A.',
  '18236120': 'Nu Pagamentos S.A.',
  '00416968': 'Banco Inter S.A.',
  '10573521': 'Mercado Pago Instituição de Pagamento Ltda.',
  '08561701': 'PagSeguro Internet Instituição de Pagamento S.A.',
  '13140088': 'Acesso Soluções de Pagamento S.A.',
  '31872495': 'Banco C6 S.A.',
  '92702067': 'Banco do Estado do Rio Grande do Sul S.A.',
  '01181521': 'Banco Cooperativo Sicredi S.A.',
  '02038232': 'Banco Cooperativo do Brasil S.A. - Bancoob',
  '30306294': 'Banco BTG Pactual S.A.',
  '04902979': 'Banco da Amazônia S.A.',
  '07237373': 'Banco do Nordeste do Brasil S.A.',
};

export function bankName(ispb: string | null | undefined, institution?: { ispb: string; name: string }): string | null {
  if (!ispb) return null;
  if (institution && ispb === institution.ispb) return institution.name;
  return BANKS[ispb] ?? null;
}
