// Log Analytics and workspace-based Application Insights. Local authentication is off: telemetry is
// accepted only from clients signed in with Microsoft Entra ID (the app's identity, which holds
// Monitoring Metrics Publisher on the component). The workspace also receives the audit trail: Key Vault's
// AuditEvent and the table service's write and delete logs (their diagnostic settings, beside each).
// An incident review needs those months later: their two tables keep rows auditRetentionDays (90 by
// default) where the rest of the workspace keeps 30, and up to auditTotalRetentionDays in long-term
// retention (the archive), read back with a search job or a restore (docs/operations.md, "The audit trail").

@description('Name of the Log Analytics workspace.')
param logAnalyticsName string

@description('Name of the Application Insights component.')
param applicationInsightsName string

@description('Region of both resources.')
param location string

@description('Tags of both resources.')
param tags object

@minValue(30)
@maxValue(730)
@description('Days the audit tables can be queried.')
param auditRetentionDays int

@minValue(0)
@maxValue(4383)
@description('Total days the audit tables are kept, long-term retention included; below auditRetentionDays: none.')
param auditTotalRetentionDays int

// Where the audit trail lands: Key Vault's AuditEvent (the diagnostic setting's default destination,
// AzureDiagnostics) and the table service's StorageWrite and StorageDelete (StorageTableLogs).
var auditTables = [
  'AzureDiagnostics'
  'StorageTableLogs'
]

resource logAnalytics 'Microsoft.OperationalInsights/workspaces@2023-09-01' = {
  name: logAnalyticsName
  location: location
  tags: tags
  properties: {
    retentionInDays: 30
    sku: {
      name: 'PerGB2018'
    }
  }
}

resource auditRetention 'Microsoft.OperationalInsights/workspaces/tables@2023-09-01' = [
  for table in auditTables: {
    parent: logAnalytics
    name: table
    properties: {
      retentionInDays: auditRetentionDays
      // Below auditRetentionDays (0 included): no long-term retention, the total is the interactive period.
      totalRetentionInDays: max(auditRetentionDays, auditTotalRetentionDays)
    }
  }
]

resource applicationInsights 'Microsoft.Insights/components@2020-02-02' = {
  name: applicationInsightsName
  location: location
  tags: tags
  kind: 'web'
  properties: {
    Application_Type: 'web'
    WorkspaceResourceId: logAnalytics.id
    DisableLocalAuth: true
  }
}

@description('Name of the Application Insights component.')
output applicationInsightsName string = applicationInsights.name

@description('Resource ID of the Log Analytics workspace: where the diagnostic settings send the audit logs.')
output logAnalyticsWorkspaceId string = logAnalytics.id
