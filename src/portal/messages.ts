import { dictionary, type Locale, type PortalLocale } from './i18n.js';

/** The words every portal page shares: the frame, the navigation, the refusals of the guard. */
export const common = dictionary(
  {
    brand: 'pixgate · merchant portal',
    pageTitle: (title: string) => `${title} · pixgate portal`,
    skip: 'Skip to content',
    signOut: 'Sign out',
    apiKey: 'API key',
    account: (id: number) => `account ${id}`,
    language: 'Language',
    timesIn: (zone: string) => `Times in ${zone}`,
    change: 'Change',
    navBalance: 'Balance',
    navStatement: 'Statement',
    navCharge: 'Charge',
    navTef: 'Transfer (TEF)',
    navWebhooks: 'Webhooks',
    navMed: 'MED',
    navSandbox: 'Sandbox',
    navKeys: 'API keys',
    navTeam: 'Team',
    notFound: 'Not found',
    notFoundText: 'There is no such page.',
    goToPortal: 'Go to the portal',
    notPermitted: 'Not permitted',
    notPermittedText: (permission: string) => `This API key does not have the permission ${permission}.`,
    refused: 'Refused',
    crossSite: 'Cross-site form submissions are refused.',
    notAForm: 'This page takes a form (application/x-www-form-urlencoded) only.',
    csrf: 'The form was out of date or not sent from this portal (CSRF check). Go back, reload and try again.',
    noFormId: 'The form was out of date (it carries no one-time id). Go back, reload the page and try again.',
    stillRunning: 'Still running',
    stillRunningText: 'This form is still being processed. Look at the statement before sending it again.',
    somethingWrong: 'Something went wrong; nothing was changed. Try again.',
    refusedHttp: (status: number) => `Refused (HTTP ${status})`,
    fixFields: 'Check the fields marked below.',
    optional: 'optional',
    any: 'any',
    yes: 'yes',
    no: 'no',
  },
  {
    brand: 'pixgate · portal do lojista',
    pageTitle: (title) => `${title} · portal pixgate`,
    skip: 'Pular para o conteúdo',
    signOut: 'Sair',
    apiKey: 'Chave de API',
    account: (id) => `conta ${id}`,
    language: 'Idioma',
    timesIn: (zone) => `Horários em ${zone}`,
    change: 'Alterar',
    navBalance: 'Saldo',
    navStatement: 'Extrato',
    navCharge: 'Cobrança',
    navTef: 'Transferência (TEF)',
    navWebhooks: 'Webhooks',
    navMed: 'MED',
    navSandbox: 'Sandbox',
    navKeys: 'Chaves de API',
    navTeam: 'Equipe',
    notFound: 'Página não encontrada',
    notFoundText: 'Esta página não existe.',
    goToPortal: 'Ir para o portal',
    notPermitted: 'Sem permissão',
    notPermittedText: (permission) => `Esta chave de API não tem a permissão ${permission}.`,
    refused: 'Recusado',
    crossSite: 'Envios de formulário de outro site são recusados.',
    notAForm: 'Esta página aceita apenas formulários (application/x-www-form-urlencoded).',
    csrf: 'O formulário estava desatualizado ou não foi enviado por este portal (verificação CSRF). Volte, recarregue a página e tente de novo.',
    noFormId: 'O formulário estava desatualizado (não tem identificador de uso único). Volte, recarregue a página e tente de novo.',
    stillRunning: 'Ainda em processamento',
    stillRunningText: 'Este formulário ainda está sendo processado. Confira o extrato antes de enviá-lo de novo.',
    somethingWrong: 'Algo deu errado; nada foi alterado. Tente de novo.',
    refusedHttp: (status) => `Recusado (HTTP ${status})`,
    fixFields: 'Confira os campos indicados abaixo.',
    optional: 'opcional',
    any: 'todos',
    yes: 'sim',
    no: 'não',
  },
);

/**
 * The statuses the portal shows, by language (a status without an entry is shown as it is). The
 * statement's displayed statuses (`completed`, `pending`, `rejected`, `failed`) are the names its
 * filter offers too (docs/portal.md).
 */
const STATUS_LABELS: Record<Locale, Record<string, string>> = {
  en: {
    completed: 'Completed', pending: 'Pending', rejected: 'Rejected', failed: 'Failed', processing: 'Processing', settled: 'Settled',
    delivered: 'Delivered', cancelled: 'Cancelled', active: 'Active', inactive: 'Inactive', paid: 'Paid', expired: 'Expired',
    OPEN: 'Open', CLOSED: 'Closed', CANCELLED: 'Cancelled', ACCEPTED: 'Accepted', REJECTED: 'Rejected', valid: 'Valid', invalid: 'Invalid',
  },
  'pt-BR': {
    completed: 'Concluída', pending: 'Pendente', rejected: 'Rejeitada', failed: 'Falhou', processing: 'Em processamento', settled: 'Liquidada',
    delivered: 'Entregue', cancelled: 'Cancelada', active: 'Ativo', inactive: 'Inativo', paid: 'Paga', expired: 'Expirada',
    OPEN: 'Aberto', CLOSED: 'Encerrado', CANCELLED: 'Cancelado', ACCEPTED: 'Aceito', REJECTED: 'Rejeitado', valid: 'Válido', invalid: 'Inválido',
  },
};

export function statusLabel(status: string, where: PortalLocale | Locale): string {
  const locale = typeof where === 'string' ? where : where.locale;
  return Object.hasOwn(STATUS_LABELS[locale], status) ? STATUS_LABELS[locale][status]! : status;
}
