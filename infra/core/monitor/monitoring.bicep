// Log Analytics and workspace-based Application Insights. Local authentication is off: telemetry is
// accepted only from clients signed in with Microsoft Entra ID (the app's identity, which holds
// Monitoring Metrics Publisher on the component). The workspace also receives the audit trail: Key Vault's
// AuditEvent and the table service's write and delete logs (their diagnostic settings, beside each).

@description('Name of the Log Analytics workspace.')
param logAnalyticsName string

@description('Name of the Application Insights component.')
param applicationInsightsName string

@description('Region of both resources.')
param location string

@description('Tags of both resources.')
param tags object

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
